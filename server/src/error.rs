//! The backends' error: what went wrong, in the protocol's terms but not
//! its types. Only the gRPC service (`service.rs`) turns it into a
//! `tonic::Status`, so a backend can be driven and tested without gRPC.

/// What kind of failure, as a client should treat it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The request is malformed (a bad hash, an unknown kind, no chunk).
    Invalid,
    /// The request is refused as things stand (blobs missing, a Go
    /// client's garden mismatch): `FAILED_PRECONDITION`.
    Refused,
    /// Stored or sent data is damaged: `DATA_LOSS`.
    Damaged,
    /// Lost a race (another push or prune moved first): try again.
    Retry,
    /// An object or a chunk list over the server's size limits (never
    /// worth sending again as it is).
    TooLarge,
    /// What was asked for is not there.
    NotFound,
    /// The store cannot be reached for now.
    Unavailable,
    /// The store did not answer in time.
    Timeout,
    /// The key is not (or no longer) allowed.
    Denied,
    /// A failure of the server itself.
    Internal,
}

/// A backend's error: a [`Kind`] and the words for the client.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    kind: Kind,
    message: String,
}

/// A backend's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

macro_rules! kinds {
    ($($(#[$doc:meta])* $name:ident => $kind:ident,)*) => {
        impl Error {
            $(
                $(#[$doc])*
                pub fn $name(message: impl Into<String>) -> Error {
                    Error { kind: Kind::$kind, message: message.into() }
                }
            )*
        }
    };
}

kinds! {
    /// A malformed request.
    invalid => Invalid,
    /// A request refused as things stand.
    refused => Refused,
    /// Damaged data.
    damaged => Damaged,
    /// A lost race; try again.
    retry => Retry,
    /// Over a size limit.
    too_large => TooLarge,
    /// Not there.
    not_found => NotFound,
    /// The store cannot be reached.
    unavailable => Unavailable,
    /// The store did not answer in time.
    timeout => Timeout,
    /// Not allowed.
    denied => Denied,
    /// The server's own failure.
    internal => Internal,
}

impl Error {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Its words.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// An error and its causes on one line.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    sgard_garden::error_chain(e)
}

/// A store error met while taking or reading objects.
pub(crate) fn store_error(e: sgard_store::Error) -> Error {
    match e {
        sgard_store::Error::Corrupt { hash, actual } => Error::damaged(format!(
            "blob {hash}: the bytes sent hash to {actual}; dropped"
        )),
        sgard_store::Error::TooLarge { limit } => Error::too_large(format!(
            "a blob larger than the server's limit of {limit} bytes; dropped"
        )),
        other => Error::internal(chain(&other)),
    }
}

/// A file's content over `--max-file-size` (sent whole, or as the chunk
/// list of its chunks), named by its hash so the client can say which of
/// its files it is (both backends refuse with these words).
pub(crate) fn blob_too_large(hash: &sgard_store::Hash, limit: u64) -> Error {
    Error::too_large(format!(
        "content {hash} {} of {limit} bytes (--max-file-size); dropped",
        sgard_proto::TOO_LARGE
    ))
}
