//! OAuth tokens for HTTP servers under the MCP authorization spec, with the broker as the
//! client: where they come from ([`Grant`]: client credentials, a `toolbroker login`, or per
//! caller by cross-app access), cached until shortly before they expire, renewed once when the
//! server refuses one (401), and more scope asked for when it says `insufficient_scope` (403),
//! within a limit. rmcp does discovery and the token requests; this module decides when.

mod authorizer;
mod cross_app;
pub(crate) mod discovery;
pub(crate) mod exchange;
mod failures;
pub(crate) mod key;
mod login_grant;
mod machine;
pub(crate) mod scopes;
pub(crate) mod shared;
pub(crate) mod store;

use std::{
    sync::{Arc, PoisonError, RwLock},
    time::{Duration, Instant},
};

use secrecy::{ExposeSecret, SecretString};
use url::Url;

pub use self::{
    authorizer::Authorizer,
    cross_app::{CallerBearer, CrossAppTokens},
};
use self::{login_grant::LoginGrant, machine::Machine, shared::SharedTokens};
use crate::{
    domain::{
        caller::CallerValues,
        config::{Grant, OAuth, ServerSpec, TransportSpec},
        outcome::{LoginHint, OAuthFailure},
        token_lifetime,
    },
    shared_state::Shared,
};

/// How long getting one token may take, discovery included: an authorization server that does
/// not answer fails the request that waits for it (and frees the way for the next attempt)
/// rather than holding it, and every request behind it, for ever.
pub const TOKEN_DEADLINE: Duration = Duration::from_secs(30);

/// `getting` within [`TOKEN_DEADLINE`].
async fn within(
    getting: impl std::future::Future<Output = Result<SecretString, OAuthFailure>>,
) -> Result<SecretString, OAuthFailure> {
    tokio::time::timeout(TOKEN_DEADLINE, getting)
        .await
        .unwrap_or(Err(OAuthFailure::TimedOut(TOKEN_DEADLINE)))
}

/// How long before its expiry a token is renewed: 30 s, or half its lifetime if that is less
/// (rmcp refreshes a login's tokens by the same rule).
pub fn renewal_margin(lifetime: Duration) -> Duration {
    Duration::from_secs(30).min(lifetime / 2)
}

/// A token held, and when to get a new one.
#[derive(Clone)]
struct Held {
    token: SecretString,
    /// `None`: it does not expire (the server gave no lifetime); only a refusal renews it.
    renew_at: Option<Instant>,
    /// How long it lives from when it was received, a day at most (`None`: no expiry given).
    lifetime: Option<Duration>,
    /// The scope it was granted (as the answer said, else as asked).
    scopes: Vec<String>,
}

impl Held {
    /// A token issued now that lives `lifetime` (a day at most, whatever the server said).
    fn new(token: String, lifetime: Option<Duration>, scopes: Vec<String>) -> Self {
        let lifetime = lifetime.map(token_lifetime::clamped);
        let renew_at = lifetime.map(|life| Instant::now() + life - renewal_margin(life));
        Self {
            token: token.into(),
            renew_at,
            lifetime,
            scopes,
        }
    }

    fn fresh(&self) -> bool {
        self.renew_at.is_none_or(|at| Instant::now() < at)
    }

    fn is(&self, token: &SecretString) -> bool {
        self.token.expose_secret() == token.expose_secret()
    }
}

/// One server's token, the same for all its sessions: client credentials or a login.
pub struct ServerTokens {
    source: Source,
    held: RwLock<Option<Held>>,
    /// Held while a token is got, so that concurrent requests wait for one answer.
    acquiring: tokio::sync::Mutex<()>,
}

enum Source {
    /// Client credentials; with Redis, the fleet's token.
    Machine(Machine, Option<SharedTokens>),
    Login(LoginGrant),
}

impl ServerTokens {
    fn new(source: Source) -> Arc<Self> {
        Arc::new(Self {
            source,
            held: RwLock::new(None),
            acquiring: tokio::sync::Mutex::new(()),
        })
    }

    /// The token to send: the one held while fresh, else a new one.
    pub async fn token(&self) -> Result<SecretString, OAuthFailure> {
        if let Some(token) = self.fresh() {
            return Ok(token);
        }
        let _one = self.acquiring.lock().await;
        if let Some(token) = self.fresh() {
            return Ok(token);
        }
        let held = match &self.source {
            Source::Machine(machine, None) => machine.acquire().await,
            Source::Machine(machine, Some(shared)) => {
                shared::machine::acquire(machine, shared, None).await
            }
            Source::Login(login) => login.acquire(None).await,
        };
        self.keep(held)
    }

    /// A token other than `rejected`, which the server refused (401): one another request got
    /// meanwhile, else a new one.
    pub async fn renew(&self, rejected: &SecretString) -> Result<SecretString, OAuthFailure> {
        let _one = self.acquiring.lock().await;
        if let Some(held) = self.held()
            && !held.is(rejected)
            && held.fresh()
        {
            return Ok(held.token);
        }
        let held = match &self.source {
            Source::Machine(machine, None) => machine.acquire().await,
            Source::Machine(machine, Some(shared)) => {
                shared::machine::acquire(machine, shared, Some(rejected)).await
            }
            Source::Login(login) => login.acquire(Some(rejected)).await,
        };
        self.keep(held)
    }

    /// A token with the scope `required` the server asked for instead of `rejected` (403
    /// `insufficient_scope`), or why none can be had.
    pub async fn step_up(
        &self,
        required: Option<&str>,
        rejected: &SecretString,
    ) -> Result<SecretString, OAuthFailure> {
        let _one = self.acquiring.lock().await;
        let held = self.held();
        if let Some(held) = &held
            && !held.is(rejected)
        {
            return Ok(held.token.clone());
        }
        let granted = held.map(|held| held.scopes).unwrap_or_default();
        let stepped = match &self.source {
            Source::Machine(machine, shared) => {
                let stepped = machine.step_up(required, &granted).await;
                // The other replicas would be refused the narrower token too.
                if let (Ok(held), Some(shared)) = (&stepped, shared) {
                    shared::machine::store(shared, held).await;
                }
                stepped
            }
            Source::Login(login) => login.step_up(required, rejected).await,
        };
        self.keep(stepped)
    }

    /// Reads a login's token store again (SIGHUP): the next request uses what it holds (with
    /// Redis, what Redis holds then).
    pub fn reload(&self) {
        if let Source::Login(login) = &self.source {
            login.reload();
            *self.held.write().unwrap_or_else(PoisonError::into_inner) = None;
        }
    }

    fn fresh(&self) -> Option<SecretString> {
        self.held().filter(Held::fresh).map(|held| held.token)
    }

    fn held(&self) -> Option<Held> {
        self.held
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn keep(&self, held: Result<Held, OAuthFailure>) -> Result<SecretString, OAuthFailure> {
        let held = held?;
        let token = held.token.clone();
        *self.held.write().unwrap_or_else(PoisonError::into_inner) = Some(held);
        Ok(token)
    }
}

/// What one session asks for its requests' tokens.
#[derive(Clone)]
pub enum Bearer {
    /// The server's token (all sessions share it).
    Server(Arc<ServerTokens>),
    /// This session's caller's token (cross-app access).
    Caller(CallerBearer),
}

impl Bearer {
    /// The token to send now.
    pub async fn token(&self) -> Result<SecretString, OAuthFailure> {
        within(async {
            match self {
                Bearer::Server(tokens) => tokens.token().await,
                Bearer::Caller(caller) => caller.token().await,
            }
        })
        .await
    }

    /// A token other than `rejected`, which the server refused.
    pub async fn renew(&self, rejected: &SecretString) -> Result<SecretString, OAuthFailure> {
        within(async {
            match self {
                Bearer::Server(tokens) => tokens.renew(rejected).await,
                Bearer::Caller(caller) => caller.renew(rejected).await,
            }
        })
        .await
    }

    /// A token with the scope `required`, or why none can be had.
    pub async fn step_up(
        &self,
        required: Option<&str>,
        rejected: &SecretString,
    ) -> Result<SecretString, OAuthFailure> {
        within(async {
            match self {
                Bearer::Server(tokens) => tokens.step_up(required, rejected).await,
                Bearer::Caller(caller) => caller.step_up(required, rejected).await,
            }
        })
        .await
    }
}

/// A server's OAuth, as its spec says.
#[derive(Clone)]
pub enum ServerAuth {
    /// One token for the server.
    Server(Arc<ServerTokens>),
    /// A token per caller.
    CrossApp(Arc<CrossAppTokens>),
}

impl ServerAuth {
    /// The OAuth of `spec`, if it has an `oauth` section (only HTTP servers do); with
    /// `shared`, its server-wide tokens are kept in Redis for every replica.
    pub fn of(spec: &ServerSpec, shared: Option<&Shared>) -> Option<Self> {
        let OAuth { grant, scopes } = spec.oauth.as_ref()?;
        let TransportSpec::Http(http) = &spec.transport else {
            return None;
        };
        let url = Url::parse(&http.url).ok()?;
        let server = spec.name.clone();
        let shared = shared.map(|shared| SharedTokens::new(shared.clone(), &server));
        Some(match grant {
            Grant::ClientCredentials(client) => {
                ServerAuth::Server(ServerTokens::new(Source::Machine(
                    Machine::new(server, url, client.clone(), scopes.clone()),
                    shared,
                )))
            }
            Grant::Login(login) => {
                let hint = LoginHint {
                    server,
                    store: shared
                        .as_ref()
                        .map_or_else(|| login.token_store.clone(), |shared| shared.shown().into()),
                };
                ServerAuth::Server(ServerTokens::new(Source::Login(LoginGrant::new(
                    hint,
                    url,
                    login.clone(),
                    shared,
                ))))
            }
            Grant::CrossApp(cross_app) => ServerAuth::CrossApp(CrossAppTokens::new(
                server,
                url,
                cross_app.clone(),
                scopes.clone(),
            )),
        })
    }

    /// What a session for `caller` sends.
    pub fn bearer(&self, caller: &dyn CallerValues) -> Bearer {
        match self {
            ServerAuth::Server(tokens) => Bearer::Server(tokens.clone()),
            ServerAuth::CrossApp(app) => Bearer::Caller(CallerBearer::new(app.clone(), caller)),
        }
    }

    /// Reads token stores again (SIGHUP).
    pub fn reload(&self) {
        if let ServerAuth::Server(tokens) = self {
            tokens.reload();
        }
    }
}
