//! The protective sections of the config: `auth` (bearer tokens, client certificates), `tls`
//! (the listener's certificate) and `limits` (message and result sizes; connections in
//! `connections`). Pure: token files are named here and read by the caller.

use std::path::PathBuf;

use secrecy::SecretString;
use serde::Deserialize;
use serde_json::Value;

use super::{
    DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_RESULT_BYTES, JwtSpec, Rate,
    connections::ConnectionLimits, path, validate::Checker,
};
use crate::domain::caller::CallerKind;

/// Who may call the broker. With no tokens, no JWT issuer and no client CA, anyone may.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Auth {
    /// Accepted bearer tokens (several, for rotation).
    pub tokens: Vec<TokenSpec>,
    /// Accepted JWTs.
    pub jwt: Option<JwtSpec>,
    /// Clients must present a certificate signed by this CA (needs `tls`).
    pub client_ca: Option<PathBuf>,
}

impl Auth {
    /// Whether any check is configured.
    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty() || self.jwt.is_some() || self.client_ca.is_some()
    }

    /// The first kind of caller configured, in the section's order (tokens, JWTs, client
    /// certificates; anonymous without auth): its plain ids are written as they are by
    /// `${caller.id}`. A client certificate names the caller only when it is the only check.
    pub fn first_kind(&self) -> CallerKind {
        if !self.tokens.is_empty() {
            CallerKind::Token
        } else if self.jwt.is_some() {
            CallerKind::Jwt
        } else if self.client_ca.is_some() {
            CallerKind::Certificate
        } else {
            CallerKind::Anonymous
        }
    }
}

/// One accepted bearer token.
#[derive(Debug, Clone)]
pub struct TokenSpec {
    /// A name for logs (never the token): `name`, or `auth.tokens[i]`.
    pub name: String,
    /// Where the token comes from.
    pub source: TokenSource,
    /// Exposed tool names (`*` and `?` wildcards) this token may see and call; empty = all.
    pub tools: Vec<String>,
    /// Exposed prompt names a token restricted by `tools` may see and get; empty = none.
    pub prompts: Vec<String>,
    /// Servers whose resources a token restricted by `tools` may list and read; empty = none.
    pub resources: Vec<String>,
    /// The view the token is bound to: it sees and calls only that view's tools.
    pub view: Option<String>,
}

/// Where a token's value comes from.
#[derive(Debug, Clone)]
pub enum TokenSource {
    /// From an environment variable, read while parsing.
    Value(SecretString),
    /// From a file, read by whoever loads the config (and again on reload).
    File(PathBuf),
}

impl PartialEq for TokenSpec {
    fn eq(&self, other: &Self) -> bool {
        use secrecy::ExposeSecret;
        let same_source = match (&self.source, &other.source) {
            (TokenSource::Value(a), TokenSource::Value(b)) => {
                a.expose_secret() == b.expose_secret()
            }
            (TokenSource::File(a), TokenSource::File(b)) => a == b,
            _ => false,
        };
        same_source
            && self.name == other.name
            && self.tools == other.tools
            && self.prompts == other.prompts
            && self.resources == other.resources
            && self.view == other.view
    }
}
impl Eq for TokenSpec {}

/// The listener's certificate chain and key (PEM files; read again on SIGHUP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain.
    pub cert: PathBuf,
    /// Private key.
    pub key: PathBuf,
}

/// The largest size any of `limits` takes: 4 GiB − 1, the most a gRPC message's 32-bit length
/// says (pre-encoded answers write it as such).
pub const MAX_SIZE: u64 = u32::MAX as u64;

/// Size limits, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest gRPC request accepted.
    pub max_request_bytes: usize,
    /// The largest gRPC response sent.
    pub max_response_bytes: usize,
    /// The largest tool result read from an MCP server.
    pub max_result_bytes: usize,
    /// Calls per caller, over all tools; `None` = unlimited.
    pub caller_rate: Option<Rate>,
    /// Connections, streams and the time to a request head (`limits.max_connections`, ...).
    pub connections: ConnectionLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            caller_rate: None,
            connections: ConnectionLimits::default(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    tokens: Option<Vec<Value>>,
    jwt: Option<Value>,
    client_ca: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    name: Option<String>,
    value_env: Option<String>,
    value_file: Option<String>,
    tools: Option<Vec<String>>,
    prompts: Option<Vec<String>>,
    resources: Option<Vec<String>>,
    view: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert: Option<String>,
    key: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_request_bytes: Option<Value>,
    max_response_bytes: Option<Value>,
    max_result_bytes: Option<Value>,
    caller_rate: Option<Value>,
    max_connections: Option<u64>,
    max_concurrent_streams: Option<u64>,
    header_timeout: Option<Value>,
}

impl Checker<'_, '_> {
    /// The `auth` section.
    pub(super) fn auth(&mut self, raw: Option<Value>) -> Auth {
        let Some(raw) = self.section::<RawAuth>(raw, "auth") else {
            return Auth::default();
        };
        let tokens = raw
            .tokens
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .filter_map(|(i, value)| self.token(value, &path::index("auth.tokens", i)))
            .collect();
        let jwt = self.jwt(raw.jwt);
        let client_ca = raw
            .client_ca
            .and_then(|ca| self.expand(&ca, "auth.client_ca"))
            .map(PathBuf::from);
        Auth {
            tokens,
            jwt,
            client_ca,
        }
    }

    fn token(&mut self, value: Value, at: &str) -> Option<TokenSpec> {
        let raw = self.section::<RawToken>(Some(value), at)?;
        let source = match (raw.value_env, raw.value_file) {
            (Some(name), None) => match (self.lookup)(&name) {
                Some(value) if !value.trim().is_empty() => {
                    TokenSource::Value(SecretString::from(value.trim().to_owned()))
                }
                _ => {
                    let reason = format!("environment variable {name} is not set (or is empty)");
                    self.error(&path::field(at, "value_env"), reason);
                    return None;
                }
            },
            (None, Some(file)) => TokenSource::File(PathBuf::from(
                self.expand(&file, &path::field(at, "value_file"))?,
            )),
            _ => {
                self.error(at, "give exactly one of \"value_env\" or \"value_file\"");
                return None;
            }
        };
        let name = raw.name.unwrap_or_else(|| at.to_owned());
        Some(TokenSpec {
            name,
            source,
            tools: raw.tools.unwrap_or_default(),
            prompts: raw.prompts.unwrap_or_default(),
            resources: raw.resources.unwrap_or_default(),
            view: raw.view,
        })
    }

    /// The `tls` section: both files or neither.
    pub(super) fn tls(&mut self, raw: Option<Value>) -> Option<TlsFiles> {
        let raw = self.section::<RawTls>(raw, "tls")?;
        let cert = raw.cert.and_then(|c| self.expand(&c, "tls.cert"));
        let key = raw.key.and_then(|k| self.expand(&k, "tls.key"));
        match (cert, key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.into(),
                key: key.into(),
            }),
            _ => {
                self.error("tls", "give both \"cert\" and \"key\" (PEM files)");
                None
            }
        }
    }

    /// The `limits` section: sizes as bytes (`4194304`) or with a unit (`4MiB`, `512KB`).
    pub(super) fn limits(&mut self, raw: Option<Value>) -> Limits {
        let defaults = Limits::default();
        let Some(raw) = self.section::<RawLimits>(raw, "limits") else {
            return defaults;
        };
        Limits {
            max_request_bytes: self.size(
                raw.max_request_bytes,
                defaults.max_request_bytes,
                "limits.max_request_bytes",
            ),
            max_response_bytes: self.size(
                raw.max_response_bytes,
                defaults.max_response_bytes,
                "limits.max_response_bytes",
            ),
            max_result_bytes: self.size(
                raw.max_result_bytes,
                defaults.max_result_bytes,
                "limits.max_result_bytes",
            ),
            caller_rate: self.rate(raw.caller_rate, "limits.caller_rate"),
            connections: self.connection_limits(
                raw.max_connections,
                raw.max_concurrent_streams,
                raw.header_timeout,
            ),
        }
    }

    /// A size in bytes: 1 to [`MAX_SIZE`].
    fn size(&mut self, raw: Option<Value>, default: usize, at: &str) -> usize {
        let bytes = match raw {
            None => return default,
            Some(Value::Number(n)) => n.as_u64().ok_or_else(|| format!("invalid size {n}")),
            Some(Value::String(text)) => text
                .trim()
                .parse::<bytesize::ByteSize>()
                .map(|size| size.as_u64())
                .map_err(|e| format!("invalid size {text:?} ({e}); write e.g. 4MiB or 4194304")),
            Some(other) => Err(format!("expected a size like \"4MiB\", found {other}")),
        };
        match bytes {
            Ok(0) => {
                self.error(at, "must be greater than zero");
                default
            }
            Ok(bytes) if bytes > MAX_SIZE => {
                let reason = format!(
                    "must be between 1 and {MAX_SIZE} bytes (4 GiB - 1), not {bytes}: a gRPC \
                     message's length is 32 bits"
                );
                self.error(at, reason);
                default
            }
            Ok(bytes) => usize::try_from(bytes).unwrap_or(default),
            Err(reason) => {
                self.error(at, reason);
                default
            }
        }
    }
}
