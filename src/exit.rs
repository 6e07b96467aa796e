//! Exit codes and the error that carries one.

use std::fmt;
use std::io;

/// Something went wrong (the default).
pub const ERROR: u8 = 1;
/// The command line is wrong.
pub const USAGE: u8 = 2;
/// Stored data failed its hash or is missing.
pub const INTEGRITY: u8 = 3;
/// A conflict, or an operation refused (e.g. the server is ahead).
pub const CONFLICT: u8 = 4;
/// Stopped by Ctrl-C or another signal.
pub const INTERRUPTED: u8 = 130;

/// Whether the error is an interruption (Ctrl-C).
pub fn is_interrupted(err: &anyhow::Error) -> bool {
    sgard_store::cancel::requested()
        || err.chain().any(|c| {
            c.downcast_ref::<sgard_garden::Error>()
                .is_some_and(sgard_garden::Error::is_interrupted)
                || c.downcast_ref::<sgard_store::Error>()
                    .is_some_and(|e| matches!(e, sgard_store::Error::Interrupted))
        })
}

/// An error that decides its own exit code.
#[derive(Debug)]
pub struct Fail {
    /// The exit code.
    pub code: u8,
    /// The message.
    pub message: String,
}

impl Fail {
    /// An integrity failure (exit 3).
    pub fn integrity(message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Fail {
            code: INTEGRITY,
            message: message.into(),
        })
    }
}

impl Fail {
    /// A conflict, or an operation refused (exit 4).
    pub fn conflict(message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Fail {
            code: CONFLICT,
            message: message.into(),
        })
    }
}

impl Fail {
    /// A usage error found after parsing (exit 2).
    pub fn usage(message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Fail {
            code: USAGE,
            message: message.into(),
        })
    }
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Fail {}

/// The exit code for an error: the first [`Fail`] in the chain, else 3 for
/// integrity failures anywhere in it, else 1.
pub fn code_for(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if let Some(f) = cause.downcast_ref::<Fail>() {
            return f.code;
        }
        if cause
            .downcast_ref::<sgard::remote::client::Refused>()
            .is_some()
        {
            return CONFLICT;
        }
        if cause
            .downcast_ref::<sgard::remote::client::Untrusted>()
            .is_some()
        {
            return INTEGRITY;
        }
        if let Some(g) = cause.downcast_ref::<sgard_garden::Error>()
            && g.is_integrity()
        {
            return INTEGRITY;
        }
        // Refused as things stand (a pull, a conflict): nothing was changed.
        if let Some(
            sgard_garden::Error::Unsettled { .. }
            | sgard_garden::Error::OutsideHome { .. }
            | sgard_garden::Error::Conflict(_),
        ) = cause.downcast_ref::<sgard_garden::Error>()
        {
            return CONFLICT;
        }
        if let Some(s) = cause.downcast_ref::<sgard_store::Error>()
            && s.is_integrity()
        {
            return INTEGRITY;
        }
    }
    ERROR
}

/// Whether the error is a closed stdout (`sgard list | head`): not an error.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}
