//! `auth.jwt`: bearer tokens that are JWTs, verified against a JWKS (a file, or a URL fetched
//! by the broker), their caller named by a claim and their tools granted by another. Pure: the
//! key file is named here and read by whoever loads the config.

use std::{path::PathBuf, time::Duration};

use serde::Deserialize;
use serde_json::Value;

use super::{path, validate::Checker};

/// How often a `jwks_url` may be fetched again, when the config does not say.
pub const DEFAULT_JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(15);

/// How JWTs are verified and whom they name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtSpec {
    /// Must equal the token's `iss`.
    pub issuer: String,
    /// Must be one of the token's `aud`.
    pub audience: String,
    /// Where the signing keys come from.
    pub keys: JwksSource,
    /// A `jwks_url` is fetched again (for an unknown key id) at most this often.
    pub jwks_refetch_interval: Duration,
    /// The claim that names the caller (`sub` by default).
    pub caller_claim: String,
    /// The claim whose values are looked up in `grants`: a space-separated string or an array.
    pub grants_claim: Option<String>,
    /// Claim values and the tool patterns each grants; `None` = every tool.
    pub grants: Option<Vec<(String, Vec<String>)>>,
}

/// Where a JWKS is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A file, read at start and on SIGHUP.
    File(PathBuf),
    /// A URL, fetched at start and again for a key id it does not know.
    Url(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJwt {
    issuer: Option<String>,
    audience: Option<String>,
    jwks_file: Option<String>,
    jwks_url: Option<String>,
    jwks_refetch_interval: Option<Value>,
    caller_claim: Option<String>,
    grants_claim: Option<String>,
    grants: Option<Value>,
}

/// How the grants map is written: claim value → list of patterns.
#[derive(Debug, Deserialize)]
struct Patterns(Vec<String>);

impl Checker<'_, '_> {
    /// The `auth.jwt` section.
    pub(super) fn jwt(&mut self, raw: Option<Value>) -> Option<JwtSpec> {
        let at = "auth.jwt";
        let raw = self.section::<RawJwt>(raw, at)?;
        let grants_raw = raw
            .grants
            .and_then(|g| self.grants(g, &path::field(at, "grants")));
        let mut required = |value: Option<String>, field: &str| {
            let field_at = path::field(at, field);
            match value.map(|v| self.expand(&v, &field_at)) {
                Some(Some(value)) if !value.trim().is_empty() => Some(value),
                Some(Some(_)) => {
                    self.error(&field_at, "must not be empty");
                    None
                }
                Some(None) => None,
                None => {
                    self.error(&field_at, "missing; JWTs cannot be checked without it");
                    None
                }
            }
        };
        let issuer = required(raw.issuer, "issuer");
        let audience = required(raw.audience, "audience");
        let keys = match (raw.jwks_file, raw.jwks_url) {
            (Some(file), None) => self
                .expand(&file, &path::field(at, "jwks_file"))
                .map(|file| JwksSource::File(file.into())),
            (None, Some(url)) => {
                let url = self.url(&url, &path::field(at, "jwks_url"));
                Some(JwksSource::Url(url))
            }
            _ => {
                self.error(at, "give exactly one of \"jwks_file\" or \"jwks_url\"");
                None
            }
        };
        let grants_claim = raw.grants_claim;
        if grants_raw.is_some() != grants_claim.is_some() {
            let reason = "\"grants\" and \"grants_claim\" go together: the claim's values are \
                          looked up in the grants";
            self.error(at, reason);
        }
        let jwks_refetch_interval = self.duration(
            raw.jwks_refetch_interval,
            DEFAULT_JWKS_REFETCH_INTERVAL,
            &path::field(at, "jwks_refetch_interval"),
        );
        Some(JwtSpec {
            issuer: issuer?,
            audience: audience?,
            keys: keys?,
            jwks_refetch_interval,
            caller_claim: raw.caller_claim.unwrap_or_else(|| "sub".into()),
            grants_claim,
            grants: grants_raw,
        })
    }

    /// `grants`: a map of claim values to lists of tool patterns.
    fn grants(&mut self, raw: Value, at: &str) -> Option<Vec<(String, Vec<String>)>> {
        let Value::Object(map) = raw else {
            self.error(
                at,
                "expected a mapping of claim values to lists of tool patterns",
            );
            return None;
        };
        let mut grants = Vec::with_capacity(map.len());
        for (value, patterns) in map {
            match serde_json::from_value::<Patterns>(patterns) {
                Ok(Patterns(patterns)) => grants.push((value, patterns)),
                Err(_) => {
                    let reason = "expected a list of tool patterns, e.g. [\"fs_*\"]";
                    self.error(&path::field(at, &value), reason);
                }
            }
        }
        Some(grants)
    }
}
