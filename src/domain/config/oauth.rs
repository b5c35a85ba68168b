//! `oauth` of an HTTP server entry, checked: how the broker gets the tokens the server's
//! authorization server issues (the MCP authorization spec, with the broker as the client).
//! Which grant follows from the fields given: a `token_store` (filled by `toolbroker login`),
//! `cross_app_access` (per caller), or a client id with a secret or key (client credentials).
//! Pure.

use std::{fmt, path::PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{
    path,
    validate::{Around, Checker},
};
use crate::domain::caller::SecretText;

/// How the broker is authorized at one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuth {
    /// Which grant brings the tokens.
    pub grant: Grant,
    /// The scopes asked for; empty: as the server's challenge or metadata says.
    pub scopes: Vec<String>,
}

/// Where the tokens come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// The client-credentials grant: the broker's own identity.
    ClientCredentials(Client),
    /// Tokens a person got with `toolbroker login` (authorization code + PKCE), refreshed.
    Login(Login),
    /// Per caller: the caller's ID token traded at the IdP, then at the server's
    /// authorization server (enterprise-managed authorization, ID-JAG).
    CrossApp(CrossApp),
}

impl Grant {
    /// The grant's name, as messages and `ListServers` say it.
    pub fn name(&self) -> &'static str {
        match self {
            Grant::ClientCredentials(_) => "client credentials",
            Grant::Login(_) => "login (authorization code)",
            Grant::CrossApp(_) => "cross-app access",
        }
    }
}

/// A confidential client: its id and how it proves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// The client id registered at the authorization server.
    pub id: String,
    /// Its proof.
    pub auth: ClientAuth,
}

/// How a client authenticates at the token endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientAuth {
    /// A secret (`client_secret_basic` or `client_secret_post`, as the server advertises).
    Secret(SecretText),
    /// A signed assertion (`private_key_jwt`, RFC 7523).
    PrivateKey(PrivateKey),
}

/// A private key file for `private_key_jwt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateKey {
    /// The PEM file (PKCS#8, or PKCS#1 for RSA).
    pub file: PathBuf,
    /// The algorithm; `None`: RS256 for an RSA key, ES256 or ES384 for an EC key by its curve.
    pub algorithm: Option<SigningAlgorithm>,
    /// Where the file is named in the config, for errors found when it is read.
    pub at: String,
}

/// The JWS algorithms a client assertion can be signed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningAlgorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    RS256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    RS384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    RS512,
    /// ECDSA on P-256 with SHA-256.
    ES256,
    /// ECDSA on P-384 with SHA-384.
    ES384,
}

impl SigningAlgorithm {
    const ALL: [(&'static str, SigningAlgorithm); 5] = [
        ("RS256", SigningAlgorithm::RS256),
        ("RS384", SigningAlgorithm::RS384),
        ("RS512", SigningAlgorithm::RS512),
        ("ES256", SigningAlgorithm::ES256),
        ("ES384", SigningAlgorithm::ES384),
    ];

    /// Its JWS name.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, alg)| *alg == self)
            .map(|(name, _)| *name)
            .expect("every algorithm is listed")
    }

    /// Whether it signs with an RSA key (else an EC key).
    pub fn is_rsa(self) -> bool {
        matches!(
            self,
            SigningAlgorithm::RS256 | SigningAlgorithm::RS384 | SigningAlgorithm::RS512
        )
    }
}

impl fmt::Display for SigningAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tokens from `toolbroker login`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    /// The file `login` writes and the broker reads, refreshes and writes back (mode 0600).
    pub token_store: PathBuf,
    /// A pre-registered client id; `None`: a client ID metadata document, else dynamic
    /// client registration.
    pub client_id: Option<String>,
    /// The pre-registered client's secret, if it has one.
    pub client_secret: Option<SecretText>,
    /// An HTTPS URL of this client's metadata document (SEP-991), used as its client id where
    /// the authorization server accepts one.
    pub client_metadata_url: Option<String>,
    /// The loopback redirect URI `login` listens on; `None`: `http://127.0.0.1:<free
    /// port>/callback`.
    pub redirect_uri: Option<String>,
}

/// Enterprise-managed authorization, per caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossApp {
    /// The broker's client at the server's authorization server, which takes the assertion.
    pub client_id: String,
    /// Its secret.
    pub client_secret: SecretText,
    /// The enterprise IdP's token endpoint, where the caller's ID token is exchanged.
    pub idp_token_endpoint: String,
    /// The broker's client id at the IdP.
    pub idp_client_id: String,
    /// Its secret; `None`: a public client.
    pub idp_client_secret: Option<SecretText>,
    /// The IdP's issuer, which the assertion must name; `None`: the `iss` of the caller's ID
    /// token.
    pub idp_issuer: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOAuth {
    client_id: Option<String>,
    client_secret_env: Option<String>,
    private_key_file: Option<String>,
    signing_algorithm: Option<String>,
    scopes: Option<Vec<String>>,
    token_store: Option<String>,
    client_metadata_url: Option<String>,
    redirect_uri: Option<String>,
    cross_app_access: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCrossApp {
    idp_token_endpoint: Option<String>,
    idp_client_id: Option<String>,
    idp_client_secret_env: Option<String>,
    idp_issuer: Option<String>,
}

/// What a client may prove itself with, as given.
struct Proof {
    secret: Option<SecretText>,
    /// `client_secret_env` was given (its variable may be unset).
    secret_named: bool,
    key_file: Option<String>,
    algorithm: Option<SigningAlgorithm>,
}

impl Checker<'_, '_> {
    /// `oauth`: which grant its fields make, each field checked.
    pub(super) fn oauth(&mut self, raw: Option<Value>, at: &str, around: Around) -> Option<OAuth> {
        let at = path::field(at, "oauth");
        let raw = self.section::<RawOAuth>(raw, &at)?;
        let before = self.errors.len();
        self.oauth_fits(&at, around);
        let field = |name: &str| path::field(&at, name);
        let client_id = raw
            .client_id
            .and_then(|id| self.expand(&id, &field("client_id")))
            .and_then(|id| self.non_blank(id, &field("client_id")));
        let secret_named = raw.client_secret_env.is_some();
        let secret = raw
            .client_secret_env
            .and_then(|name| self.secret_env(&name, &field("client_secret_env")));
        let scopes = self.scopes(raw.scopes, &field("scopes"));
        let key_file = raw
            .private_key_file
            .and_then(|file| self.expand(&file, &field("private_key_file")))
            .and_then(|file| self.non_blank(file, &field("private_key_file")));
        let algorithm = raw
            .signing_algorithm
            .and_then(|alg| self.algorithm(&alg, &field("signing_algorithm")));
        let token_store = raw
            .token_store
            .and_then(|file| self.expand(&file, &field("token_store")))
            .and_then(|file| self.non_blank(file, &field("token_store")));
        let metadata_url = raw
            .client_metadata_url
            .and_then(|url| self.client_metadata_url(&url, &field("client_metadata_url")));
        let redirect_uri = raw
            .redirect_uri
            .and_then(|uri| self.redirect_uri(&uri, &field("redirect_uri")));
        let cross_app = raw.cross_app_access;
        if algorithm.is_some() && key_file.is_none() {
            let reason = "only with private_key_file (it says how the key signs)";
            self.error(&field("signing_algorithm"), reason);
        }
        let grant = if let Some(cross_app) = cross_app {
            let at = field("cross_app_access");
            for (given, name) in [
                (token_store.is_some(), "token_store"),
                (key_file.is_some(), "private_key_file"),
                (metadata_url.is_some(), "client_metadata_url"),
                (redirect_uri.is_some(), "redirect_uri"),
            ] {
                if given {
                    let reason = "not with cross_app_access (its tokens come from the caller's \
                                  ID token)";
                    self.error(&field(name), reason);
                }
            }
            if !around.per_caller {
                let reason = "needs \"isolation: per-caller\": the tokens are the caller's";
                self.error(&at, reason);
            }
            let secret = (secret, secret_named);
            self.cross_app(cross_app, &at, client_id, secret, &field)
                .map(Grant::CrossApp)
        } else if let Some(token_store) = token_store {
            if key_file.is_some() {
                let reason = "not with token_store: `toolbroker login` authenticates with \
                              client_id and client_secret_env (or none)";
                self.error(&field("private_key_file"), reason);
            }
            if secret.is_some() && client_id.is_none() {
                let reason = "client_secret_env needs client_id (a pre-registered client)";
                self.error(&field("client_secret_env"), reason);
            }
            Some(Grant::Login(Login {
                token_store: PathBuf::from(token_store),
                client_id,
                client_secret: secret,
                client_metadata_url: metadata_url,
                redirect_uri,
            }))
        } else {
            for (given, name) in [
                (metadata_url.is_some(), "client_metadata_url"),
                (redirect_uri.is_some(), "redirect_uri"),
            ] {
                if given {
                    let reason = "only with token_store (for `toolbroker login`)";
                    self.error(&field(name), reason);
                }
            }
            let proof = Proof {
                secret,
                secret_named,
                key_file,
                algorithm,
            };
            self.client_credentials(client_id, proof, &at)
                .map(Grant::ClientCredentials)
        };
        let grant = grant?;
        (self.errors.len() == before).then_some(OAuth { grant, scopes })
    }

    /// Whether the entry can take `oauth` at all.
    fn oauth_fits(&mut self, at: &str, around: Around) {
        if !around.over_http {
            self.error(at, "only for HTTP servers (with \"url\")");
        } else if around.legacy_sse {
            let reason = "not with \"transport: sse\": MCP authorization came with streamable \
                          HTTP (2025-03-26); legacy SSE servers predate it";
            self.error(at, reason);
        }
        if around.authorization_header {
            let reason = "not with an Authorization header: the broker sends the OAuth token \
                          there";
            self.error(at, reason);
        }
        if around.token_exchange {
            let reason = "not with token_exchange; for per-caller tokens use \
                          oauth.cross_app_access";
            self.error(at, reason);
        }
    }

    /// The client-credentials grant: a client id and exactly one of a secret and a key.
    fn client_credentials(
        &mut self,
        client_id: Option<String>,
        proof: Proof,
        at: &str,
    ) -> Option<Client> {
        let Proof {
            secret,
            secret_named,
            key_file,
            algorithm,
        } = proof;
        let auth = match (secret, key_file) {
            (Some(_), Some(_)) => {
                let reason = "give client_secret_env or private_key_file, not both";
                self.error(&path::field(at, "private_key_file"), reason);
                return None;
            }
            (Some(secret), None) => ClientAuth::Secret(secret),
            (None, Some(file)) => ClientAuth::PrivateKey(PrivateKey {
                file: PathBuf::from(file),
                algorithm,
                at: path::field(at, "private_key_file"),
            }),
            // The secret's variable is unset, which was reported.
            (None, None) if secret_named => return None,
            (None, None) => {
                let reason = "says nothing of where tokens come from: give token_store (tokens \
                              from `toolbroker login`), client_id with client_secret_env or \
                              private_key_file (client credentials), or cross_app_access (per \
                              caller)";
                self.error(at, reason);
                return None;
            }
        };
        let Some(id) = client_id else {
            let reason = "missing; the client credentials grant needs it";
            self.error(&path::field(at, "client_id"), reason);
            return None;
        };
        Some(Client { id, auth })
    }

    /// `cross_app_access`, with the client at the server's authorization server.
    fn cross_app(
        &mut self,
        raw: Value,
        at: &str,
        client_id: Option<String>,
        (secret, secret_named): (Option<SecretText>, bool),
        outer: &dyn Fn(&str) -> String,
    ) -> Option<CrossApp> {
        let raw = self.section::<RawCrossApp>(Some(raw), at)?;
        let field = |name: &str| path::field(at, name);
        let endpoint = match raw.idp_token_endpoint {
            Some(url) => Some(self.url(&url, &field("idp_token_endpoint"))),
            None => {
                self.error(
                    &field("idp_token_endpoint"),
                    "missing; cross_app_access needs it",
                );
                None
            }
        };
        let idp_client_id = match raw.idp_client_id {
            Some(id) => self.expand(&id, &field("idp_client_id")),
            None => {
                self.error(
                    &field("idp_client_id"),
                    "missing; cross_app_access needs it",
                );
                None
            }
        };
        let idp_secret = raw
            .idp_client_secret_env
            .and_then(|name| self.secret_env(&name, &field("idp_client_secret_env")));
        let idp_issuer = raw
            .idp_issuer
            .map(|url| self.url(&url, &field("idp_issuer")));
        if client_id.is_none() {
            self.error(&outer("client_id"), "missing; cross_app_access needs it");
        }
        // A variable named but unset is reported where it is named.
        if !secret_named {
            let reason = "missing; cross_app_access authenticates at the server's authorization \
                          server with it";
            self.error(&outer("client_secret_env"), reason);
        }
        Some(CrossApp {
            client_id: client_id?,
            client_secret: secret?,
            idp_token_endpoint: endpoint?,
            idp_client_id: idp_client_id?,
            idp_client_secret: idp_secret,
            idp_issuer,
        })
    }

    /// A secret named by the environment variable `name`.
    fn secret_env(&mut self, name: &str, at: &str) -> Option<SecretText> {
        match (self.lookup)(name) {
            Some(value) if !value.is_empty() => Some(SecretText::from(value)),
            _ => {
                let reason = format!("environment variable {name} is not set (or is empty)");
                self.error(at, reason);
                None
            }
        }
    }

    /// Scope tokens (RFC 6749 §3.3): non-empty, no spaces or quotes, each once.
    fn scopes(&mut self, raw: Option<Vec<String>>, at: &str) -> Vec<String> {
        let mut scopes: Vec<String> = Vec::new();
        for (i, scope) in raw.unwrap_or_default().into_iter().enumerate() {
            let at = path::index(at, i);
            let valid = !scope.is_empty()
                && scope
                    .chars()
                    .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\');
            if !valid {
                let reason = format!(
                    "invalid scope {scope:?}: a scope is printable ASCII without spaces, quotes \
                     or backslashes; give several as a list"
                );
                self.error(&at, reason);
            } else if scopes.contains(&scope) {
                self.error(&at, format!("scope {scope:?} is listed twice"));
            } else {
                scopes.push(scope);
            }
        }
        scopes
    }

    fn algorithm(&mut self, raw: &str, at: &str) -> Option<SigningAlgorithm> {
        let found = SigningAlgorithm::ALL
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(raw));
        if found.is_none() {
            let names: Vec<&str> = SigningAlgorithm::ALL.iter().map(|(n, _)| *n).collect();
            let hint = super::raw::suggest(raw, &names);
            self.error(at, format!("unknown signing algorithm {raw:?}; {hint}"));
        }
        found.map(|(_, alg)| *alg)
    }

    /// An HTTPS URL with a path, as SEP-991 requires of a client id.
    fn client_metadata_url(&mut self, raw: &str, at: &str) -> Option<String> {
        let url = self.expand(raw, at)?;
        match url::Url::parse(&url) {
            Ok(parsed) if parsed.scheme() == "https" && parsed.path() != "/" => Some(url),
            _ => {
                let reason = format!(
                    "invalid client_metadata_url {raw:?}: it must be an https:// URL with a path \
                     (it is the client id)"
                );
                self.error(at, reason);
                None
            }
        }
    }

    /// A loopback `http://` redirect URI (RFC 8252 §7.3): the browser comes back to `login`.
    fn redirect_uri(&mut self, raw: &str, at: &str) -> Option<String> {
        let uri = self.expand(raw, at)?;
        let loopback = url::Url::parse(&uri).ok().filter(|parsed| {
            parsed.scheme() == "http"
                && parsed.port().is_some()
                && matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"))
        });
        if loopback.is_none() {
            let reason = format!(
                "invalid redirect_uri {raw:?}: `toolbroker login` listens on it, so it must be \
                 http:// on 127.0.0.1, [::1] or localhost with a port, like \
                 http://127.0.0.1:8976/callback"
            );
            self.error(at, reason);
        }
        loopback.map(|_| uri)
    }

    fn non_blank(&mut self, text: String, at: &str) -> Option<String> {
        if text.trim().is_empty() {
            self.error(at, "must not be empty");
            None
        } else {
            Some(text)
        }
    }
}
