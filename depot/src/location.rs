//! Where a depot lives (`--store`), and the S3 settings taken from the
//! standard AWS environment variables.

use std::fmt;
use std::path::PathBuf;

use crate::{Error, Result};

/// A parsed store location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A folder on this machine (any text that is not `memory:` or a URL).
    Dir(PathBuf),
    /// A fresh store in this process's memory (`memory:`), for tests.
    Memory,
    /// An S3-compatible bucket (`s3://BUCKET[/PREFIX]`): every key lives
    /// under `PREFIX/` (at the bucket's root when there is no prefix).
    S3 {
        /// The bucket's name.
        bucket: String,
        /// The key prefix, without leading or trailing `/` (may be empty).
        prefix: String,
    },
}

impl Location {
    /// Parses `s3://BUCKET[/PREFIX]`, `memory:` or a folder's path.
    ///
    /// The bucket must be a valid S3 bucket name (3 to 63 of `a-z 0-9 . -`);
    /// each prefix segment is 1 to 255 of `A-Z a-z 0-9 . _ -` and not `.` or
    /// `..`. Other URL schemes are refused rather than taken for folders.
    ///
    /// # Errors
    /// [`Error::BadLocation`] naming the location and what is wrong.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |reason: &str| Error::BadLocation {
            location: text.to_owned(),
            reason: reason.to_owned(),
        };
        if text.is_empty() {
            return Err(bad("empty"));
        }
        if text == "memory:" {
            return Ok(Location::Memory);
        }
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("no bucket: expected s3://BUCKET[/PREFIX]"));
            }
            if !is_bucket_name(bucket) {
                return Err(bad(
                    "the bucket name must be 3 to 63 of a-z 0-9 . -, beginning and ending with a letter or digit",
                ));
            }
            let prefix = prefix.trim_end_matches('/');
            if !prefix.is_empty() && !prefix.split('/').all(is_prefix_segment) {
                return Err(bad(
                    "each prefix segment must be 1 to 255 of A-Z a-z 0-9 . _ -, and not . or ..",
                ));
            }
            return Ok(Location::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.to_owned(),
            });
        }
        if let Some((scheme, _)) = text.split_once("://") {
            return Err(bad(&format!(
                "unsupported scheme {scheme:?}: use s3://BUCKET[/PREFIX], memory: or a folder"
            )));
        }
        Ok(Location::Dir(PathBuf::from(text)))
    }
}

fn is_bucket_name(b: &str) -> bool {
    (3..=63).contains(&b.len())
        && b.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'-'))
        && b.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && b.bytes().last().is_some_and(|c| c.is_ascii_alphanumeric())
}

fn is_prefix_segment(s: &str) -> bool {
    (1..=255).contains(&s.len())
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Dir(p) => write!(f, "{}", p.display()),
            Location::Memory => f.write_str("memory:"),
            Location::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Location::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

/// The S3 settings, as the standard AWS environment variables give them.
///
/// Build it with [`AwsEnv::from_env`] in the server's one place that reads
/// the environment, or fill the fields directly (tests pass their own, as
/// they run in parallel and must not change the process environment).
#[derive(Clone, Default)]
pub struct AwsEnv {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: Option<String>,
    /// `AWS_SECRET_ACCESS_KEY` (never shown by `Debug`).
    pub secret_access_key: Option<String>,
    /// `AWS_SESSION_TOKEN`, for temporary credentials (never shown by `Debug`).
    pub session_token: Option<String>,
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    pub region: Option<String>,
    /// `AWS_ENDPOINT_URL` (an S3-compatible service; AWS itself when unset).
    pub endpoint: Option<String>,
    /// `AWS_ALLOW_HTTP` as given: `true` allows a plain `http://` endpoint.
    pub allow_http: Option<String>,
}

impl AwsEnv {
    /// Reads the variables from this process's environment.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `var` (empty values count as unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| var(name).filter(|v| !v.is_empty());
        AwsEnv {
            access_key_id: get("AWS_ACCESS_KEY_ID"),
            secret_access_key: get("AWS_SECRET_ACCESS_KEY"),
            session_token: get("AWS_SESSION_TOKEN"),
            region: get("AWS_REGION").or_else(|| get("AWS_DEFAULT_REGION")),
            endpoint: get("AWS_ENDPOINT_URL"),
            allow_http: get("AWS_ALLOW_HTTP"),
        }
    }

    /// The checked settings for the store at `location`.
    pub(crate) fn check(&self, location: &str) -> Result<CheckedAws> {
        let fail = |reason: String| Error::Config {
            location: location.to_owned(),
            reason,
        };
        let access_key_id = self
            .access_key_id
            .clone()
            .ok_or_else(|| fail("AWS_ACCESS_KEY_ID is not set".to_owned()))?;
        let secret_access_key = self
            .secret_access_key
            .clone()
            .ok_or_else(|| fail("AWS_SECRET_ACCESS_KEY is not set".to_owned()))?;
        let region = self
            .region
            .clone()
            .ok_or_else(|| fail("AWS_REGION is not set".to_owned()))?;
        let allow_http = match self.allow_http.as_deref() {
            None => false,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            Some(v) => {
                return Err(fail(format!(
                    "AWS_ALLOW_HTTP is {v:?}: expected true or false"
                )));
            }
        };
        if let Some(endpoint) = &self.endpoint {
            if endpoint.starts_with("http://") {
                if !allow_http {
                    return Err(fail(format!(
                        "AWS_ENDPOINT_URL {endpoint} is plain http: set AWS_ALLOW_HTTP=true to allow it"
                    )));
                }
            } else if !endpoint.starts_with("https://") {
                return Err(fail(format!(
                    "AWS_ENDPOINT_URL {endpoint:?} is not an http:// or https:// URL"
                )));
            }
        }
        Ok(CheckedAws {
            access_key_id,
            secret_access_key,
            session_token: self.session_token.clone(),
            region,
            endpoint: self.endpoint.clone(),
            allow_http,
        })
    }
}

impl fmt::Debug for AwsEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "<hidden>");
        f.debug_struct("AwsEnv")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &hidden(&self.secret_access_key))
            .field("session_token", &hidden(&self.session_token))
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("allow_http", &self.allow_http)
            .finish()
    }
}

/// [`AwsEnv`] once checked: everything an S3 store needs is there.
pub(crate) struct CheckedAws {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    pub region: String,
    pub endpoint: Option<String>,
    pub allow_http: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_locations() {
        assert_eq!(Location::parse("memory:").ok(), Some(Location::Memory));
        assert_eq!(
            Location::parse("s3://my-bucket/a/b/").ok(),
            Some(Location::S3 {
                bucket: "my-bucket".into(),
                prefix: "a/b".into()
            })
        );
        assert_eq!(
            Location::parse("s3://my-bucket").ok(),
            Some(Location::S3 {
                bucket: "my-bucket".into(),
                prefix: String::new()
            })
        );
        assert_eq!(
            Location::parse("/srv/sgard").ok(),
            Some(Location::Dir("/srv/sgard".into()))
        );
        assert_eq!(
            Location::parse("relative/dir").ok(),
            Some(Location::Dir("relative/dir".into()))
        );
        for bad in [
            "",
            "s3://",
            "s3:///prefix",
            "s3://UPPER/x",
            "s3://ab",
            "s3://b_ucket",
            "s3://bucket/../x",
            "s3://bucket/a/./b",
            "s3://bucket/a//b",
            "s3://bucket/a b",
            "gs://bucket/x",
            "http://host/x",
        ] {
            assert!(
                matches!(Location::parse(bad), Err(Error::BadLocation { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(
            Location::parse("s3://bkt/p/q").map(|l| l.to_string()).ok(),
            Some("s3://bkt/p/q".into())
        );
    }

    fn env(pairs: &[(&str, &str)]) -> AwsEnv {
        AwsEnv::from_vars(|name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    fn reason(e: &AwsEnv) -> String {
        match e.check("s3://b") {
            Err(Error::Config { reason, .. }) => reason,
            Err(other) => format!("unexpected error {other}"),
            Ok(_) => "accepted".into(),
        }
    }

    #[test]
    fn names_the_missing_variable() {
        let full = [
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_REGION", "eu-west-1"),
        ];
        assert_eq!(reason(&env(&full)), "accepted");
        for missing in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"] {
            let some: Vec<_> = full
                .iter()
                .copied()
                .filter(|(k, _)| *k != missing)
                .collect();
            assert!(reason(&env(&some)).contains(missing), "{missing}");
        }
        let mut with_default_region = full.to_vec();
        with_default_region[2] = ("AWS_DEFAULT_REGION", "us-east-1");
        assert_eq!(reason(&env(&with_default_region)), "accepted");

        let mut http = full.to_vec();
        http.push(("AWS_ENDPOINT_URL", "http://127.0.0.1:9000"));
        assert!(reason(&env(&http)).contains("AWS_ALLOW_HTTP=true"));
        http.push(("AWS_ALLOW_HTTP", "true"));
        assert_eq!(reason(&env(&http)), "accepted");
        let mut odd = full.to_vec();
        odd.push(("AWS_ALLOW_HTTP", "yes"));
        assert!(reason(&env(&odd)).contains("AWS_ALLOW_HTTP"));
        let mut ftp = full.to_vec();
        ftp.push(("AWS_ENDPOINT_URL", "ftp://x"));
        assert!(reason(&env(&ftp)).contains("AWS_ENDPOINT_URL"));
    }

    #[test]
    fn debug_hides_secrets() {
        let e = env(&[
            ("AWS_SECRET_ACCESS_KEY", "topsecret"),
            ("AWS_SESSION_TOKEN", "tok"),
        ]);
        let shown = format!("{e:?}");
        assert!(
            !shown.contains("topsecret") && !shown.contains("tok\""),
            "{shown}"
        );
    }
}
