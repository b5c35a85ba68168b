//! Why the broker has no usable OAuth token for a server: which step failed (discovery, the
//! token endpoint, the key, the token store, the server's verdict), in words a person can act
//! on. Never a token or a secret. Pure.

use std::{fmt, path::PathBuf};

use crate::domain::names::ServerName;

/// A step of getting a token at a token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenStep {
    /// The client-credentials grant.
    ClientCredentials,
    /// Refreshing a login's tokens.
    Refresh,
    /// Exchanging the caller's ID token at the enterprise IdP for an identity assertion.
    IdentityAssertion,
    /// Trading the identity assertion at the server's authorization server (JWT bearer).
    AssertionGrant,
}

impl fmt::Display for TokenStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TokenStep::ClientCredentials => "the client credentials grant",
            TokenStep::Refresh => "refreshing the login's tokens",
            TokenStep::IdentityAssertion => {
                "the exchange of the caller's ID token at the IdP (cross_app_access)"
            }
            TokenStep::AssertionGrant => {
                "the JWT bearer grant of the identity assertion at the server's authorization server"
            }
        })
    }
}

/// What `toolbroker login` is to be run for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginHint {
    /// The server.
    pub server: ServerName,
    /// Its token store.
    pub store: PathBuf,
}

impl fmt::Display for LoginHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "run `toolbroker login {} --config <this config file>` (tokens go to {})",
            self.server,
            self.store.display()
        )
    }
}

/// Why a step-up to more scope is not tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoStepUp {
    /// A person must authorize the new scope: the login is to be run again.
    Login(LoginHint),
    /// The token already holds the scope the server asks for, so asking again cannot help.
    AlreadyGranted,
    /// The server did not say which scope it needs.
    Unnamed,
    /// The broker asked for more scope this many times already.
    Limit(u32),
}

/// Why there is no usable token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthFailure {
    /// Protected resource or authorization server metadata could not be had (the discovery
    /// client's words, which name the URL).
    Discovery(String),
    /// A token endpoint failed a step: unreachable, or an error answer (its `error` and
    /// `error_description`, as the OAuth client reports them).
    Token {
        /// Which step.
        step: TokenStep,
        /// Why.
        reason: String,
    },
    /// The private key cannot be read or sign.
    Key {
        /// The key file.
        file: PathBuf,
        /// Why.
        reason: String,
    },
    /// The token store cannot be read or written.
    Store {
        /// The file.
        store: PathBuf,
        /// Why.
        reason: String,
    },
    /// Nobody has logged in yet.
    NotLoggedIn(LoginHint),
    /// The login's tokens are spent: expired with no refresh token, or the refresh was refused.
    LoginExpired {
        /// What to run.
        hint: LoginHint,
        /// Why.
        reason: String,
    },
    /// The server refused the request with its token for another reason than scope (HTTP 403).
    Forbidden {
        /// The challenge's `error`, if any.
        error: Option<String>,
        /// Its `error_description`, if any.
        description: Option<String>,
    },
    /// The server refused a token the broker had just renewed (HTTP 401 twice).
    Refused {
        /// The challenge's `error`, if any.
        error: Option<String>,
        /// Its `error_description`, if any.
        description: Option<String>,
    },
    /// The server needs scope the token does not have (HTTP 403 `insufficient_scope`).
    InsufficientScope {
        /// The scope the server named, if any.
        required: Option<String>,
        /// Why the broker does not get a token with it.
        why: NoStepUp,
    },
    /// The caller sent no ID token to exchange.
    NoIdToken,
    /// The enterprise IdP (or the server's authorization server) refused what the caller's ID
    /// token was exchanged for: an OAuth error answer, with its words.
    CallerRefused(String),
    /// Getting a token took longer than this (an authorization server that does not answer).
    TimedOut(std::time::Duration),
}

impl std::error::Error for OAuthFailure {}

impl OAuthFailure {
    /// Whether a person must act (log in, fix a file) before this can work: no point retrying
    /// at once.
    pub fn needs_person(&self) -> bool {
        matches!(
            self,
            OAuthFailure::Key { .. }
                | OAuthFailure::Store { .. }
                | OAuthFailure::NotLoggedIn(_)
                | OAuthFailure::LoginExpired { .. }
        )
    }
}

impl fmt::Display for OAuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OAuthFailure::Discovery(why) => write!(f, "OAuth discovery failed: {why}"),
            OAuthFailure::Token { step, reason } => write!(f, "{step} failed: {reason}"),
            OAuthFailure::Key { file, reason } => write!(
                f,
                "the private key {} cannot sign client assertions: {reason}",
                file.display()
            ),
            OAuthFailure::Store { store, reason } => {
                write!(f, "the token store {}: {reason}", store.display())
            }
            OAuthFailure::NotLoggedIn(hint) => write!(f, "not logged in yet: {hint}"),
            OAuthFailure::LoginExpired { hint, reason } => {
                write!(f, "the login has expired ({reason}): {hint}")
            }
            OAuthFailure::Refused { error, description } => {
                f.write_str("the server refused a freshly issued token ")?;
                challenge(f, 401, error, description)
            }
            OAuthFailure::Forbidden { error, description } => {
                f.write_str("the server refused the request ")?;
                challenge(f, 403, error, description)
            }
            OAuthFailure::InsufficientScope { required, why } => {
                f.write_str("the server needs more scope for this")?;
                if let Some(required) = required {
                    write!(f, " ({required:?})")?;
                }
                match why {
                    NoStepUp::Login(hint) => write!(
                        f,
                        "; a person must grant it: {hint}; it will ask for it, and the broker \
                         takes the new tokens on the next call"
                    ),
                    NoStepUp::AlreadyGranted => f.write_str(
                        "; the token already holds that scope, so asking again would not help",
                    ),
                    NoStepUp::Unnamed => {
                        f.write_str("; it did not say which scope, so the broker cannot ask for it")
                    }
                    NoStepUp::Limit(times) => write!(
                        f,
                        "; the broker asked for more scope {times} times already and stops \
                         there"
                    ),
                }
            }
            OAuthFailure::TimedOut(after) => write!(
                f,
                "getting a token took longer than {} s: the authorization server (discovery \
                 or its token endpoint) did not answer",
                after.as_secs()
            ),
            OAuthFailure::CallerRefused(why) => {
                write!(
                    f,
                    "the caller's identity was refused (cross_app_access): {why}"
                )
            }
            OAuthFailure::NoIdToken => f.write_str(
                "the caller sent no ID token to exchange (cross_app_access needs the caller's \
                 bearer token)",
            ),
        }
    }
}

/// "(HTTP 401, invalid_token: expired)": a refusal's status and its challenge's words.
fn challenge(
    f: &mut fmt::Formatter<'_>,
    status: u16,
    error: &Option<String>,
    description: &Option<String>,
) -> fmt::Result {
    write!(f, "(HTTP {status}")?;
    if let Some(error) = error {
        write!(f, ", {error}")?;
    }
    if let Some(description) = description {
        write!(f, ": {description}")?;
    }
    f.write_str(")")
}
