//! Per-caller servers: `isolation`, `max_sessions`, `max_sessions_per_caller`, `idle_timeout`,
//! `discovery` and `token_exchange` of a server entry, checked. Pure.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::{
    path,
    raw::{Pairs, RawServer},
    validate::Checker,
};
use crate::domain::caller::{CallerKey, CallerKind, FixedCaller, SecretText};

/// Per-caller sessions of one server alive at once, when the entry gives none.
pub const DEFAULT_MAX_SESSIONS: usize = 100;
/// The most per-caller sessions one server may have: each may be a process.
pub const MAX_SESSIONS: u64 = 10_000;
/// One caller's sessions of a server alive at once (its current one and one still finishing
/// its calls after the caller's values changed), when the entry gives none.
pub const DEFAULT_MAX_SESSIONS_PER_CALLER: usize = 2;
/// How long a caller's unused session stays open, when the entry gives none.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// Whether callers share a server's session.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Isolation {
    /// One session (per replica) for every caller.
    #[default]
    Shared,
    /// Each caller's calls run in a session of its own.
    PerCaller(PerCaller),
}

/// How a per-caller server's sessions are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerCaller {
    /// Sessions alive at once, draining and closing ones included.
    pub max_sessions: usize,
    /// One caller's sessions alive at once.
    pub max_sessions_per_caller: usize,
    /// An unused session is closed after this long.
    pub idle_timeout: Duration,
    /// The caller values of the session that lists the tools.
    pub discovery: FixedCaller,
}

/// RFC 8693 token exchange: each caller's token traded for one meant for this server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenExchange {
    /// The authorization server's token endpoint.
    pub token_url: String,
    /// The broker's client id there.
    pub client_id: String,
    /// Its client secret (HTTP Basic).
    pub client_secret: SecretText,
    /// The `audience` asked for, if any.
    pub audience: Option<String>,
    /// The `scope` asked for, if any.
    pub scope: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDiscovery {
    id: Option<String>,
    token: Option<String>,
    headers: Option<Pairs>,
    claims: Option<Pairs>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTokenExchange {
    token_url: Option<String>,
    client_id: Option<String>,
    client_secret_env: Option<String>,
    audience: Option<String>,
    scope: Option<String>,
}

impl Checker<'_, '_> {
    /// `isolation` and the fields that go with `per-caller`.
    pub(super) fn isolation(&mut self, raw: &mut RawServer, at: &str) -> Isolation {
        let isolation_at = path::field(at, "isolation");
        let per_caller = match raw.isolation.take().as_deref() {
            None | Some("shared") => false,
            Some("per-caller") => true,
            Some(other) => {
                let hint = super::raw::suggest(other, &["shared", "per-caller"]);
                self.error(
                    &isolation_at,
                    format!("unknown isolation {other:?}; {hint}"),
                );
                false
            }
        };
        let max_sessions = raw.max_sessions.take();
        let per_caller_max = raw.max_sessions_per_caller.take();
        let idle_timeout = raw.idle_timeout.take();
        let discovery = raw.discovery.take();
        if !per_caller {
            let given = [
                ("max_sessions", max_sessions.is_some()),
                ("max_sessions_per_caller", per_caller_max.is_some()),
                ("idle_timeout", idle_timeout.is_some()),
                ("discovery", discovery.is_some()),
            ];
            for (field, _) in given.iter().filter(|(_, given)| *given) {
                let reason = "only for servers with \"isolation: per-caller\"";
                self.error(&path::field(at, field), reason);
            }
            return Isolation::Shared;
        }
        Isolation::PerCaller(PerCaller {
            max_sessions: self.count(
                max_sessions,
                DEFAULT_MAX_SESSIONS,
                1..=MAX_SESSIONS,
                &path::field(at, "max_sessions"),
            ),
            max_sessions_per_caller: self.count(
                per_caller_max,
                DEFAULT_MAX_SESSIONS_PER_CALLER,
                1..=MAX_SESSIONS,
                &path::field(at, "max_sessions_per_caller"),
            ),
            idle_timeout: self.duration(
                idle_timeout,
                DEFAULT_IDLE_TIMEOUT,
                &path::field(at, "idle_timeout"),
            ),
            discovery: self.discovery(discovery, &path::field(at, "discovery")),
        })
    }

    /// The caller values of the session that lists a per-caller server's tools.
    fn discovery(&mut self, raw: Option<Value>, at: &str) -> FixedCaller {
        let mut discovery = FixedCaller::default();
        let Some(raw) = self.section::<RawDiscovery>(raw, at) else {
            return discovery;
        };
        if let Some(id) = raw
            .id
            .and_then(|id| self.expand(&id, &path::field(at, "id")))
        {
            discovery.key = CallerKey {
                kind: CallerKind::Anonymous,
                id,
            };
        }
        discovery.token = raw
            .token
            .and_then(|token| self.expand(&token, &path::field(at, "token")))
            .map(SecretText::from);
        discovery.headers = self.text_pairs(raw.headers, &path::field(at, "headers"), true);
        discovery.claims = self.text_pairs(raw.claims, &path::field(at, "claims"), false);
        discovery
    }

    /// Name-value pairs with `${VAR}` expanded; header names lower-cased.
    fn text_pairs(&mut self, pairs: Option<Pairs>, at: &str, lower: bool) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, value) in pairs.map(|p| p.0).unwrap_or_default() {
            if let Some(value) = self.expand(&value.0, &path::field(at, &name)) {
                let name = if lower {
                    name.to_ascii_lowercase()
                } else {
                    name
                };
                out.push((name, value));
            }
        }
        out
    }

    /// `token_exchange`: for per-caller HTTP servers only; every field but `audience` and
    /// `scope` required, the client secret from the environment.
    pub(super) fn token_exchange(
        &mut self,
        raw: Option<Value>,
        at: &str,
        per_caller_http: bool,
    ) -> Option<TokenExchange> {
        let at = path::field(at, "token_exchange");
        let raw = self.section::<RawTokenExchange>(raw, &at)?;
        if !per_caller_http {
            let reason = "only for HTTP servers (with \"url\") with \"isolation: per-caller\": \
                          the token exchanged is the caller's";
            self.error(&at, reason);
            return None;
        }
        let mut required = |value: Option<String>, field: &str| {
            let field_at = path::field(&at, field);
            match value {
                Some(value) => self.expand(&value, &field_at),
                None => {
                    self.error(&field_at, "missing; token_exchange needs it");
                    None
                }
            }
        };
        let token_url = required(raw.token_url, "token_url");
        let client_id = required(raw.client_id, "client_id");
        let secret_env = required(raw.client_secret_env, "client_secret_env");
        let token_url = token_url.map(|url| self.url(&url, &path::field(&at, "token_url")));
        let client_secret = secret_env.and_then(|name| match (self.lookup)(&name) {
            Some(value) if !value.is_empty() => Some(SecretText::from(value)),
            _ => {
                let reason = format!("environment variable {name} is not set (or is empty)");
                self.error(&path::field(&at, "client_secret_env"), reason);
                None
            }
        });
        let audience = raw
            .audience
            .and_then(|a| self.expand(&a, &path::field(&at, "audience")));
        let scope = raw
            .scope
            .and_then(|s| self.expand(&s, &path::field(&at, "scope")));
        Some(TokenExchange {
            token_url: token_url?,
            client_id: client_id?,
            client_secret: client_secret?,
            audience,
            scope,
        })
    }
}
