//! Tokens a person got with `toolbroker login`: read from the token store, refreshed by rmcp
//! (the refresh token, the client and the authorization server's metadata all come from the
//! store, so no discovery is needed), and the refreshed ones written back. A token the server
//! refuses makes the store be read again first: a new login may have replaced it. With Redis
//! (`state.redis`), the store is Redis, shared by every replica ([`shared`]).

mod shared;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use oauth2::TokenResponse as _;
use rmcp::transport::auth::{AuthError, AuthorizationManager, OAuthClientConfig};
use secrecy::{ExposeSecret, SecretString};
use url::Url;

use super::{
    Held, discovery,
    failures::from_auth,
    renewal_margin,
    scopes::{split, union},
    shared::SharedTokens,
    store::{TokenFile, TokenStore},
};
use crate::domain::{
    config::Login,
    outcome::{LoginHint, NoStepUp, OAuthFailure, TokenStep},
    token_lifetime,
};

/// One server's login.
pub(super) struct LoginGrant {
    hint: LoginHint,
    url: Url,
    spec: Login,
    /// The file, or with Redis only what was last read from there (rmcp's credential store).
    store: TokenStore,
    /// Redis, which holds the tokens instead of the file when configured.
    shared: Option<SharedTokens>,
    /// Set up from the store for its client; set up again when a new login changed the client.
    manager: tokio::sync::Mutex<Option<(String, AuthorizationManager)>>,
}

impl LoginGrant {
    pub(super) fn new(
        hint: LoginHint,
        url: Url,
        spec: Login,
        shared: Option<SharedTokens>,
    ) -> Self {
        let store = match &shared {
            Some(shared) => TokenStore::in_memory(shared.shown().into()),
            None => TokenStore::new(spec.token_store.clone()),
        };
        Self {
            hint,
            url,
            spec,
            store,
            shared,
            manager: tokio::sync::Mutex::new(None),
        }
    }

    /// A token: the store's while fresh, else refreshed. With `rejected` (the server refused
    /// it), the store's if a new login replaced it, else a refreshed one.
    pub(super) async fn acquire(
        &self,
        rejected: Option<&SecretString>,
    ) -> Result<Held, OAuthFailure> {
        if let Some(shared) = &self.shared {
            return self.acquire_shared(shared, rejected).await;
        }
        let mut slot = self.manager.lock().await;
        // Read each time (rarely: at expiry, after a refusal, at a restart): a new login, or an
        // expired one replaced, is taken without waiting for a SIGHUP.
        let file = self.read().await?;
        if let Some(rejected) = rejected
            && file
                .access_token()
                .is_some_and(|token| token != rejected.expose_secret())
        {
            tracing::info!(server = %self.hint.server, "using the tokens of a new login");
            return self.held(&file);
        }
        let manager = self.manager_for(&mut slot, &file).await?;
        let outcome = match rejected {
            None => manager.get_access_token().await.map(drop),
            Some(_) => manager.refresh_token().await.map(drop),
        };
        *slot = Some((file.client_id.clone(), manager));
        self.refreshed(outcome)
    }

    /// The store's token after rmcp got or refreshed it, or what its failure means.
    fn refreshed(&self, outcome: Result<(), AuthError>) -> Result<Held, OAuthFailure> {
        match outcome {
            Ok(()) => {
                let file = self.store.current().ok_or_else(|| self.not_logged_in())?;
                self.held(&file)
            }
            Err(AuthError::AuthorizationRequired) => Err(self
                .expired("the access token expired and the login holds no refresh token".into())),
            Err(AuthError::TokenRefreshRejected(why)) => {
                Err(self.expired(format!("the refresh token was refused: {why}")))
            }
            Err(error) => Err(from_auth(TokenStep::Refresh, error)),
        }
    }

    /// The manager set up for `file`'s client: the one in `slot` if it is for that client.
    async fn manager_for(
        &self,
        slot: &mut Option<(String, AuthorizationManager)>,
        file: &TokenFile,
    ) -> Result<AuthorizationManager, OAuthFailure> {
        match slot.take() {
            Some((client, manager)) if client == file.client_id => Ok(manager),
            _ => self.manager(file).await,
        }
    }

    /// The server wants scope `required` that the token `rejected` lacks: the store's token if
    /// a new login replaced it, else the scope is recorded for the next `login` to ask for.
    pub(super) async fn step_up(
        &self,
        required: Option<&str>,
        rejected: &SecretString,
    ) -> Result<Held, OAuthFailure> {
        let file = self.read().await?;
        if file
            .access_token()
            .is_some_and(|token| token != rejected.expose_secret())
        {
            return self.held(&file);
        }
        let missing = |why| OAuthFailure::InsufficientScope {
            required: required.map(str::to_owned),
            why,
        };
        let needed = split(required);
        if needed.is_empty() {
            return Err(missing(NoStepUp::Unnamed));
        }
        let granted = &file.credentials.granted_scopes;
        if needed.iter().all(|scope| granted.contains(scope)) {
            return Err(missing(NoStepUp::AlreadyGranted));
        }
        match &self.shared {
            Some(shared) => self.record_step_up(shared, &needed).await?,
            None => {
                let pending = union(&split(file.step_up.as_deref()), &needed).join(" ");
                self.store.update(|file| file.step_up = Some(pending))?;
            }
        }
        Err(missing(NoStepUp::Login(self.hint.clone())))
    }

    /// Reads the store again (SIGHUP); Redis is read anyway when the next token is needed.
    pub(super) fn reload(&self) {
        if self.shared.is_some() {
            return;
        }
        if let Err(error) = self.store.reload() {
            tracing::warn!(server = %self.hint.server, %error, "token store not reloaded");
        }
    }

    /// The store as on disk (or in Redis); an error when there is nothing in it or it is for
    /// another server.
    async fn read(&self) -> Result<TokenFile, OAuthFailure> {
        let file = match &self.shared {
            Some(shared) => self.read_shared(shared).await?,
            None => self.store.reload()?,
        };
        self.check(file.ok_or_else(|| self.not_logged_in())?)
    }

    /// `file` if it is for this server.
    fn check(&self, file: TokenFile) -> Result<TokenFile, OAuthFailure> {
        if file.server_url != self.url.as_str() {
            return Err(OAuthFailure::Store {
                store: self.hint.store.clone(),
                reason: format!(
                    "it holds a login for {}, not {}: {}",
                    file.server_url, self.url, self.hint
                ),
            });
        }
        Ok(file)
    }

    /// A manager that refreshes the store's tokens for its client.
    async fn manager(&self, file: &TokenFile) -> Result<AuthorizationManager, OAuthFailure> {
        let fail = |e| from_auth(TokenStep::Refresh, e);
        let mut manager = discovery::manager(&self.url).await.map_err(fail)?;
        manager.set_credential_store(self.store.clone());
        manager.set_metadata(file.metadata.clone());
        let mut client = OAuthClientConfig::new(&file.client_id, &file.redirect_uri);
        let secret = self
            .spec
            .client_secret
            .as_ref()
            .map(|secret| secret.expose().to_owned())
            .or_else(|| file.client_secret.clone());
        if let Some(secret) = secret {
            client = client.with_client_secret(secret);
        }
        manager.configure_client(client).map_err(fail)?;
        Ok(manager)
    }

    /// The store's token; a store without one is no login.
    fn held(&self, file: &TokenFile) -> Result<Held, OAuthFailure> {
        held(file).ok_or_else(|| self.not_logged_in())
    }

    fn not_logged_in(&self) -> OAuthFailure {
        OAuthFailure::NotLoggedIn(self.hint.clone())
    }

    fn expired(&self, reason: String) -> OAuthFailure {
        OAuthFailure::LoginExpired {
            hint: self.hint.clone(),
            reason,
        }
    }
}

/// The store's token, renewed when rmcp would refresh it: `renewal_margin` before its
/// expiry (a day at most after it was received), counted from when it was received.
fn held(file: &TokenFile) -> Option<Held> {
    let credentials = &file.credentials;
    let response = credentials.token_response.as_ref()?;
    let mut held = Held::new(
        response.access_token().secret().clone(),
        None,
        credentials.granted_scopes.clone(),
    );
    if let Some(lifetime) = response.expires_in().map(token_lifetime::clamped) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let age = credentials
            .token_received_at
            .map_or(Duration::ZERO, |received| {
                Duration::from_secs(now.saturating_sub(received))
            });
        let usable = lifetime.saturating_sub(renewal_margin(lifetime));
        held.renew_at = Some(Instant::now() + usable.saturating_sub(age));
    }
    Some(held)
}
