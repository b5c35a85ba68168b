//! The `state` section: where replicas keep what they share (rate budgets, upstream OAuth
//! tokens, tasks): a Redis (or Valkey) server, the prefix of every key, and what a rate check
//! does while that server cannot be reached. Absent, each replica keeps its own in memory. Pure.

use std::fmt;

use serde::Deserialize;
use url::Url;

use super::validate::Checker;
use crate::domain::caller::SecretText;

/// The key prefix when the file gives none.
pub const DEFAULT_KEY_PREFIX: &str = "toolbroker:";

/// What a rate check does while Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnUnavailable {
    /// Lets the call through (and counts `toolbroker_state_errors_total`).
    #[default]
    Allow,
    /// Refuses the call with UNAVAILABLE, naming Redis.
    Refuse,
}

/// The `state` section, checked.
#[derive(Clone, PartialEq, Eq)]
pub struct SharedState {
    /// `redis://` or `rediss://` (TLS), with its database; a password in it stays out of logs.
    pub redis: Url,
    /// The password from `password_env`, when given (it wins over one in the URL).
    pub password: Option<SecretText>,
    /// Put before every key, so that several brokers may share one Redis.
    pub key_prefix: String,
    /// What a rate check does while Redis is down.
    pub on_unavailable: OnUnavailable,
}

impl SharedState {
    /// The server's address as logs and messages may show it: no user or password.
    pub fn shown(&self) -> String {
        let mut shown = self.redis.clone();
        // Always possible for redis:// and rediss://, which have a host.
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        shown.to_string()
    }
}

impl SharedState {
    /// Where the shared state is, for people: the server (no password) and the prefix.
    pub fn place(&self) -> String {
        format!("{}, prefix {:?}", self.shown(), self.key_prefix)
    }
}

impl fmt::Debug for SharedState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedState")
            .field("redis", &self.shown())
            .field("key_prefix", &self.key_prefix)
            .field("on_unavailable", &self.on_unavailable)
            .finish_non_exhaustive()
    }
}

/// Where `server`'s rate budgets and OAuth tokens are kept, for `ListServers` (`None`: it has
/// neither). `caller_rate`: whether `limits.caller_rate` is set (it applies to every server);
/// `redis`: the Redis in use, as [`SharedState::place`] shows it.
pub fn kept_note(
    server: &super::ServerSpec,
    caller_rate: bool,
    redis: Option<&str>,
) -> Option<String> {
    use super::Grant;
    let rates = caller_rate || server.rate.is_some() || server.caller_rate.is_some();
    let grant = server.oauth.as_ref().map(|oauth| &oauth.grant);
    // Cross-app tokens are per caller and stay in the replica that serves the caller.
    let tokens = matches!(grant, Some(Grant::ClientCredentials(_) | Grant::Login(_)));
    let what = match (rates, tokens) {
        (false, false) => return None,
        (true, false) => "rates",
        (false, true) => "OAuth tokens",
        (true, true) => "rates and OAuth tokens",
    };
    Some(match redis {
        Some(redis) => format!("{what} kept in Redis ({redis}), shared by every replica"),
        None if tokens => {
            format!("{what} kept by this replica (tokens in its token_store or memory)")
        }
        None => format!("{what} kept in this replica's memory"),
    })
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawState {
    redis: Option<String>,
    password_env: Option<String>,
    key_prefix: Option<String>,
    on_unavailable: Option<String>,
}

impl Checker<'_, '_> {
    /// The `state` section; `None` when absent (each replica on its own).
    pub(super) fn shared_state(&mut self, raw: Option<serde_json::Value>) -> Option<SharedState> {
        let raw = self.section::<RawState>(raw, "state")?;
        let on_unavailable = match raw.on_unavailable.as_deref() {
            None | Some("allow") => OnUnavailable::Allow,
            Some("refuse") => OnUnavailable::Refuse,
            Some(other) => {
                let reason = format!(
                    "unknown value {other:?}: allow (let calls through while Redis is down) or \
                     refuse (answer UNAVAILABLE)"
                );
                self.error("state.on_unavailable", reason);
                OnUnavailable::Allow
            }
        };
        let key_prefix = raw
            .key_prefix
            .unwrap_or_else(|| DEFAULT_KEY_PREFIX.to_owned());
        if key_prefix.is_empty()
            || key_prefix
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            self.error(
                "state.key_prefix",
                "must be non-empty, without spaces or control characters (e.g. \"toolbroker:\")",
            );
        }
        let password = raw
            .password_env
            .and_then(|name| match (self.lookup)(&name) {
                Some(value) if !value.is_empty() => Some(SecretText::from(value)),
                _ => {
                    let reason = format!("environment variable {name} is not set (or is empty)");
                    self.error("state.password_env", reason);
                    None
                }
            });
        let Some(text) = raw.redis else {
            self.error(
                "state.redis",
                "required in a state section: the Redis URL, e.g. redis://redis:6379/0",
            );
            return None;
        };
        let text = self.expand(&text, "state.redis")?;
        let redis = match Url::parse(&text) {
            Ok(url) if matches!(url.scheme(), "redis" | "rediss") && url.has_host() => url,
            Ok(url) => {
                let reason = format!(
                    "scheme {:?} without a host: give redis://HOST:PORT/DB, or rediss:// for TLS",
                    url.scheme()
                );
                self.error("state.redis", reason);
                return None;
            }
            Err(error) => {
                let reason =
                    format!("not a URL ({error}): give redis://HOST:PORT/DB, or rediss:// for TLS");
                self.error("state.redis", reason);
                return None;
            }
        };
        let database = redis.path().trim_start_matches('/');
        if !database.is_empty() && database.parse::<u16>().is_err() {
            let reason =
                format!("database {database:?} is not a number: e.g. redis://redis:6379/0");
            self.error("state.redis", reason);
        }
        Some(SharedState {
            redis,
            password,
            key_prefix,
            on_unavailable,
        })
    }
}
