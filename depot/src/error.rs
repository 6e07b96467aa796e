//! The depot's error type. Every variant names what it is about: the store
//! location, the key (shown with its location, e.g.
//! `s3://bucket/prefix/gardens/default/docs/head`), or the rejected input.

use std::path::PathBuf;

use sgard_store::Hash;

/// What went wrong in a depot operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A store location that is not a folder, `memory:` or
    /// `s3://BUCKET[/PREFIX]`.
    #[error("invalid store location {location:?}: {reason}")]
    BadLocation {
        /// The location as given.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting the store needs is missing or invalid (for S3: one of the
    /// `AWS_*` environment variables, named in `reason`).
    #[error("cannot open store {location}: {reason}")]
    Config {
        /// The store location.
        location: String,
        /// What is missing or wrong.
        reason: String,
    },
    /// A garden name outside `[a-z0-9][a-z0-9._-]{0,63}`.
    #[cfg_attr(
        not(windows),
        error(
            "invalid garden name {name:?}: use 1 to 64 of a-z 0-9 . _ -, beginning with a letter or digit"
        )
    )]
    #[cfg_attr(
        windows,
        error(
            "invalid garden name {name:?}: use 1 to 64 of a-z 0-9 . _ -, beginning with a letter or digit, not ending with a dot, and no device name (con, nul, com1, ...)"
        )
    )]
    BadGarden {
        /// The name as given.
        name: String,
    },
    /// A document name outside `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`.
    #[cfg_attr(
        not(windows),
        error(
            "invalid document name {name:?}: use 1 to 128 of A-Z a-z 0-9 . _ -, beginning with a letter or digit"
        )
    )]
    #[cfg_attr(
        windows,
        error(
            "invalid document name {name:?}: use 1 to 128 of a-z 0-9 . _ -, beginning with a letter or digit, not ending with a dot, and no device name (con, nul, com1, ...)"
        )
    )]
    BadName {
        /// The name as given.
        name: String,
    },
    /// An object name that is not 64 lowercase hex digits.
    #[error("invalid object hash {text:?}: expected 64 lowercase hex digits")]
    BadHash {
        /// The text as given.
        text: String,
    },
    /// Content offered for an object does not hash (SHA-256) to the
    /// object's name; nothing was written.
    #[error("refused to write {key}: its content hashes to {actual}, not to its name")]
    HashMismatch {
        /// The object's key.
        key: String,
        /// The hash of the content offered.
        actual: Hash,
    },
    /// A stored object's content no longer hashes to its name.
    #[error("{key} is corrupt: its content hashes to {actual}")]
    Corrupt {
        /// The object's key.
        key: String,
        /// The hash of the content read.
        actual: Hash,
    },
    /// A stored object or document is larger than anything of its kind
    /// should be; it was not read.
    #[error("{key} is {size} bytes, more than the {limit} it may have; not read")]
    TooLarge {
        /// The key concerned.
        key: String,
        /// Its size, as the store gave it.
        size: u64,
        /// The most it may have.
        limit: u64,
    },
    /// No object at this key.
    #[error("{key} not found")]
    NotFound {
        /// The key asked for.
        key: String,
    },
    /// A stored document without the depot's header.
    #[error("{key} is not a depot document: {reason}")]
    BadDoc {
        /// The document's key.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The object store failed. Its words end with the cause, short: what
    /// the store answered (an S3 error code and message, an HTTP status) or
    /// why it could not be reached (`connection refused`); the store's whole
    /// error is the source.
    #[error("{op} {key}: {cause}")]
    Store {
        /// What was being done (`reading`, `writing`, `listing`, ...).
        op: &'static str,
        /// The key or key prefix concerned.
        key: String,
        /// Why, in a few words (see [`cause_of`]).
        cause: String,
        /// The store's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// The object store says the bucket does not exist: it was deleted, or
    /// the store was reset, since the depot was opened (or it was never
    /// made). Nothing can be read or written; this is never taken for an
    /// empty store.
    #[error("the object store's bucket {bucket} does not exist: was it deleted or reset?")]
    NoBucket {
        /// The bucket.
        bucket: String,
        /// The store's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// The store did not answer a [`probe`](crate::Depot::probe) in time.
    #[error("{key}: no answer within {secs} s")]
    NoAnswer {
        /// The key or key prefix asked about.
        key: String,
        /// How long it was given.
        secs: u64,
    },
    /// A file operation of the folder backend failed.
    #[error("{op} {}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or folder concerned.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A durable-write step of the folder backend failed (names its path).
    #[error(transparent)]
    Durable(#[from] sgard_store::Error),
    /// Reading the content to store failed (the caller's reader).
    #[error("reading the content for {key}")]
    Source {
        /// The object's key.
        key: String,
        /// The reader's error.
        #[source]
        source: std::io::Error,
    },
    /// Work on this key stopped half-way: its background task was
    /// cancelled, or a streaming write was used after it failed.
    #[error("work on {key} was interrupted")]
    Interrupted {
        /// The key concerned.
        key: String,
    },
}

impl Error {
    pub(crate) fn store(op: &'static str, key: String, source: object_store::Error) -> Self {
        Error::Store {
            op,
            key,
            cause: cause_of(&source),
            source: Box::new(source),
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// `Result` with the depot's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The longest cause kept from a store's answer.
const MAX_CAUSE: usize = 200;

/// Why a store call failed, in a few words for the people concerned (the
/// client's message, the server's log): the S3 error code and message the
/// store answered (`NoSuchBucket: The specified bucket does not exist`,
/// `AccessDenied: Access Denied`), else the HTTP status (`HTTP 503 Service
/// Unavailable`), else the innermost error (`connection refused (os error
/// 111)`). Only those words are taken from the answer: never a request id,
/// a signature, a key id or a URL.
pub fn cause_of(e: &object_store::Error) -> String {
    let text = chain_text(e);
    if let Some(code) = xml_tag(&text, "Code") {
        return match xml_tag(&text, "Message") {
            Some(message) => format!("{code}: {message}"),
            None => code,
        };
    }
    const STATUS: &str = "status code: ";
    if let Some(at) = text.find(STATUS) {
        let rest = &text[at + STATUS.len()..];
        let status: String = rest
            .chars()
            .take_while(|&c| c != ':' && c != '\n')
            .take(MAX_CAUSE)
            .collect();
        if status.trim().starts_with(|c: char| c.is_ascii_digit()) {
            return format!("HTTP {}", status.trim());
        }
    }
    let mut last: &(dyn std::error::Error + 'static) = e;
    while let Some(next) = last.source() {
        last = next;
    }
    let words = clean(&last.to_string());
    // `Connection refused` reads as `connection refused` mid-sentence; an
    // acronym (`HTTP`, `DNS`) stays as it is.
    let mut chars = words.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && second.is_lowercase() => {
            first.to_lowercase().chain(words.chars().skip(1)).collect()
        }
        _ => words,
    }
}

/// Whether the store's answer says the bucket does not exist.
pub(crate) fn says_no_bucket(e: &object_store::Error) -> bool {
    chain_text(e).contains("<Code>NoSuchBucket</Code>")
}

/// An error and its sources, joined.
fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut at = e.source();
    while let Some(next) = at {
        text.push_str(": ");
        text.push_str(&next.to_string());
        at = next.source();
    }
    text
}

/// The text of the first `<name>…</name>` in `text`, cleaned; `None` when
/// there is none or it is empty.
fn xml_tag(text: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&format!("</{name}>"))?;
    Some(clean(&text[start..start + len])).filter(|t| !t.is_empty())
}

/// `text` on one line, without control characters, at most
/// [`MAX_CAUSE`] characters.
fn clean(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let words = one_line.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.chars().count() <= MAX_CAUSE {
        return words;
    }
    let mut cut: String = words.chars().take(MAX_CAUSE).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic(text: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: text.to_owned().into(),
        }
    }

    #[test]
    fn the_cause_is_the_stores_code_and_message() {
        let e = generic(
            "Error performing GET http://127.0.0.1:1/b/k in 2ms - Server returned non-2xx \
             status code: 404 Not Found: <?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code>\
             <Message>The specified bucket does not exist</Message><BucketName>b</BucketName>\
             <RequestId>XYZ</RequestId></Error>",
        );
        assert_eq!(
            cause_of(&e),
            "NoSuchBucket: The specified bucket does not exist"
        );
        assert!(says_no_bucket(&e));
        let e = generic(
            "Server returned non-2xx status code: 403 Forbidden: <Error><Code>InvalidAccessKeyId\
             </Code><AWSAccessKeyId>AKIASECRETISH</AWSAccessKeyId></Error>",
        );
        let cause = cause_of(&e);
        assert_eq!(cause, "InvalidAccessKeyId");
        assert!(!says_no_bucket(&e));
    }

    #[test]
    fn without_a_code_the_cause_is_the_status_or_the_innermost_error() {
        let e = generic(
            "Error performing HEAD http://h/b/k - Server returned non-2xx status code: 503 Service Unavailable: ",
        );
        assert_eq!(cause_of(&e), "HTTP 503 Service Unavailable");
        let e = object_store::Error::Generic {
            store: "S3",
            source: Box::new(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "Connection refused (os error 111)",
            )),
        };
        assert_eq!(cause_of(&e), "connection refused (os error 111)");
        let e = generic(&format!("HTTP\n{}", "x".repeat(500)));
        let cause = cause_of(&e);
        assert!(cause.starts_with("HTTP x"), "{cause}");
        assert_eq!(cause.chars().count(), MAX_CAUSE + 1);
    }
}
