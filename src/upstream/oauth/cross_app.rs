//! Cross-app access (enterprise-managed authorization, ID-JAG): each caller's ID token is
//! exchanged at the enterprise IdP for an identity assertion meant for the server's
//! authorization server, which trades it for an access token (JWT bearer grant). rmcp makes both
//! requests and checks the assertion; this module discovers the authorization server once and
//! keeps each caller's token until shortly before it expires. Step-ups are each caller's own:
//! one caller's `insufficient_scope` never widens the scope asked for another, nor uses up the
//! step-ups another may make.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError, RwLock},
};

use rmcp::transport::auth::{
    OAuthHttpClient, default_oauth_http_client,
    enterprise::{EmaAuthorizationServer, EmaClientAuthentication, EmaExchangeRequest},
};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use url::Url;

use super::{
    Held,
    discovery::{challenge, discover},
    failures::{from_ema, with_causes},
    scopes::ScopeLadder,
};
use crate::{
    domain::{
        caller::{CallerKey, CallerValues},
        config::CrossApp,
        names::ServerName,
        outcome::{OAuthFailure, TokenStep},
    },
    upstream::transport::http,
};

/// The most callers' tokens kept per server: expired ones are dropped when it is reached. As
/// many callers' step-ups are kept; past that they are forgotten (each caller steps up again).
const MAX_CACHED: usize = 10_000;

/// The server's authorization server, as discovery found it.
#[derive(Clone)]
struct ResourceServer {
    issuer: String,
    token_endpoint: String,
    /// `client_secret_post` when it is the only secret method advertised, else Basic.
    post: bool,
}

/// Which caller, which ID token: a new ID token is exchanged anew.
#[derive(PartialEq, Eq, Hash)]
struct Key {
    caller: CallerKey,
    id_token: [u8; 32],
}

/// One server's cross-app access, for all its callers.
pub struct CrossAppTokens {
    server: ServerName,
    url: Url,
    spec: CrossApp,
    scopes: Vec<String>,
    /// Each caller's step-ups.
    ladders: Mutex<HashMap<CallerKey, Arc<ScopeLadder>>>,
    resource: tokio::sync::Mutex<Option<ResourceServer>>,
    cache: Mutex<HashMap<Key, Held>>,
}

impl CrossAppTokens {
    pub(super) fn new(
        server: ServerName,
        url: Url,
        spec: CrossApp,
        scopes: Vec<String>,
    ) -> Arc<Self> {
        Arc::new(Self {
            server,
            url,
            spec,
            scopes,
            ladders: Mutex::default(),
            resource: tokio::sync::Mutex::new(None),
            cache: Mutex::default(),
        })
    }

    /// `caller`'s token: kept while fresh, else exchanged now.
    async fn token(
        &self,
        caller: &CallerKey,
        id_token: &str,
    ) -> Result<SecretString, OAuthFailure> {
        let key = key(caller, id_token);
        if let Some(held) = self.cached(&key) {
            return Ok(held.token);
        }
        self.exchange(key, id_token).await
    }

    /// A token for `caller` other than `rejected`.
    async fn renew(
        &self,
        caller: &CallerKey,
        id_token: &str,
        rejected: &SecretString,
    ) -> Result<SecretString, OAuthFailure> {
        let key = key(caller, id_token);
        if let Some(held) = self.cached(&key)
            && !held.is(rejected)
        {
            return Ok(held.token);
        }
        self.exchange(key, id_token).await
    }

    /// A token for `caller` with the scope `required` too, unless asking cannot help.
    async fn step_up(
        &self,
        caller: &CallerKey,
        id_token: &str,
        required: Option<&str>,
        rejected: &SecretString,
    ) -> Result<SecretString, OAuthFailure> {
        let key = key(caller, id_token);
        let held = self.cached_any(&key);
        if let Some(held) = &held
            && !held.is(rejected)
        {
            return Ok(held.token.clone());
        }
        let granted = held.map(|held| held.scopes).unwrap_or_default();
        self.ladder(caller)
            .climb(required, &granted)
            .map_err(|why| OAuthFailure::InsufficientScope {
                required: required.map(str::to_owned),
                why,
            })?;
        self.exchange(key, id_token).await
    }

    /// `caller`'s step-ups (none yet: a new ladder).
    fn ladder(&self, caller: &CallerKey) -> Arc<ScopeLadder> {
        let mut ladders = self.ladders.lock().unwrap_or_else(PoisonError::into_inner);
        if !ladders.contains_key(caller) && ladders.len() >= MAX_CACHED {
            ladders.clear();
        }
        ladders.entry(caller.clone()).or_default().clone()
    }

    fn cached(&self, key: &Key) -> Option<Held> {
        self.cached_any(key).filter(Held::fresh)
    }

    fn cached_any(&self, key: &Key) -> Option<Held> {
        self.lock().get(key).cloned()
    }

    /// Both exchanges, and the token kept.
    async fn exchange(&self, key: Key, id_token: &str) -> Result<SecretString, OAuthFailure> {
        let resource = self.resource_server().await?;
        crate::tls_provider::install();
        let http = default_oauth_http_client().map_err(|e| OAuthFailure::Token {
            step: TokenStep::IdentityAssertion,
            reason: with_causes(&e),
        })?;
        let idp_issuer = match &self.spec.idp_issuer {
            Some(issuer) => issuer.clone(),
            None => issuer_of(id_token)?,
        };
        let idp_auth = match &self.spec.idp_client_secret {
            Some(secret) => EmaClientAuthentication::ClientSecretBasic(oauth2::ClientSecret::new(
                secret.expose().to_owned(),
            )),
            None => EmaClientAuthentication::None,
        };
        let idp = EmaAuthorizationServer::new(
            idp_issuer,
            &self.spec.idp_token_endpoint,
            &self.spec.idp_client_id,
        )
        .with_client_authentication(idp_auth);
        let secret = oauth2::ClientSecret::new(self.spec.client_secret.expose().to_owned());
        let resource_auth = if resource.post {
            EmaClientAuthentication::ClientSecretPost(secret)
        } else {
            EmaClientAuthentication::ClientSecretBasic(secret)
        };
        let resource_as = EmaAuthorizationServer::new(
            &resource.issuer,
            &resource.token_endpoint,
            &self.spec.client_id,
        )
        .with_client_authentication(resource_auth);
        let url = self.url.to_string();
        let scopes = self.ladder(&key.caller).on(&self.scopes);
        let token = EmaExchangeRequest::new_with_id_token(idp, resource_as, &url, id_token)
            .with_scopes(scopes)
            .exchange(&http as &dyn OAuthHttpClient, &http)
            .await
            .map_err(|error| {
                tracing::warn!(server = %self.server, caller = %key.caller, %error,
                    "cross-app access failed");
                from_ema(&error)
            })?;
        let held = Held::new(
            token.access_token.secret().clone(),
            token.expires_in,
            token.scopes.into_iter().collect(),
        );
        let secret = held.token.clone();
        self.remember(key, held);
        Ok(secret)
    }

    /// The authorization server, discovered on first use (again after a failure).
    async fn resource_server(&self) -> Result<ResourceServer, OAuthFailure> {
        let mut slot = self.resource.lock().await;
        if let Some(found) = slot.as_ref() {
            return Ok(found.clone());
        }
        let client = http::client().map_err(|e| OAuthFailure::Discovery(e.to_string()))?;
        let challenge = challenge(&client, &self.url, Default::default(), &self.server).await?;
        let metadata = discover(&self.url, challenge).await?.metadata;
        let issuer = metadata.issuer.clone().ok_or_else(|| {
            OAuthFailure::Discovery(format!(
                "the authorization server of {} publishes no issuer, which cross-app access \
                 needs (the identity assertion is meant for it)",
                self.url
            ))
        })?;
        let methods = metadata
            .additional_fields
            .get("token_endpoint_auth_methods_supported")
            .and_then(|methods| methods.as_array())
            .map(|methods| {
                methods
                    .iter()
                    .filter_map(|m| m.as_str())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let found = ResourceServer {
            issuer,
            token_endpoint: metadata.token_endpoint,
            post: methods.contains(&"client_secret_post")
                && !methods.contains(&"client_secret_basic"),
        };
        *slot = Some(found.clone());
        Ok(found)
    }

    fn remember(&self, key: Key, held: Held) {
        let mut cache = self.lock();
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, held| held.fresh());
        }
        if cache.len() < MAX_CACHED {
            cache.insert(key, held);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Held>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn key(caller: &CallerKey, id_token: &str) -> Key {
    Key {
        caller: caller.clone(),
        id_token: Sha256::digest(id_token.as_bytes()).into(),
    }
}

/// The `iss` of an ID token, read without checking it: the IdP checks the token; the issuer is
/// only what the identity assertion must name.
fn issuer_of(id_token: &str) -> Result<String, OAuthFailure> {
    #[derive(serde::Deserialize)]
    struct Claims {
        iss: String,
    }
    jsonwebtoken::dangerous::insecure_decode::<Claims>(id_token)
        .map(|data| data.claims.iss)
        .map_err(|e| OAuthFailure::Token {
            step: TokenStep::IdentityAssertion,
            reason: format!(
                "the caller's token is not a JWT with an `iss` ({e}); set \
                 cross_app_access.idp_issuer"
            ),
        })
}

/// One session's caller and its current ID token (each call brings the caller's latest).
#[derive(Clone)]
pub struct CallerBearer {
    app: Arc<CrossAppTokens>,
    caller: CallerKey,
    id_token: Arc<RwLock<Option<SecretString>>>,
}

impl CallerBearer {
    /// The bearer of `caller`'s session.
    pub(super) fn new(app: Arc<CrossAppTokens>, caller: &dyn CallerValues) -> Self {
        let bearer = Self {
            app,
            caller: caller.key().clone(),
            id_token: Arc::default(),
        };
        bearer.update(caller);
        bearer
    }

    /// Takes the caller's token of this call.
    pub fn update(&self, caller: &dyn CallerValues) {
        let current = caller
            .token()
            .map(|token| SecretString::from(token.to_owned()));
        let mut held = self
            .id_token
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let same = match (&*held, &current) {
            (Some(old), Some(new)) => old.expose_secret() == new.expose_secret(),
            (None, None) => true,
            _ => false,
        };
        if !same {
            *held = current;
        }
    }

    fn id_token(&self) -> Result<SecretString, OAuthFailure> {
        self.id_token
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or(OAuthFailure::NoIdToken)
    }

    pub(super) async fn token(&self) -> Result<SecretString, OAuthFailure> {
        let id_token = self.id_token()?;
        self.app.token(&self.caller, id_token.expose_secret()).await
    }

    pub(super) async fn renew(
        &self,
        rejected: &SecretString,
    ) -> Result<SecretString, OAuthFailure> {
        let id_token = self.id_token()?;
        self.app
            .renew(&self.caller, id_token.expose_secret(), rejected)
            .await
    }

    pub(super) async fn step_up(
        &self,
        required: Option<&str>,
        rejected: &SecretString,
    ) -> Result<SecretString, OAuthFailure> {
        let id_token = self.id_token()?;
        self.app
            .step_up(&self.caller, id_token.expose_secret(), required, rejected)
            .await
    }
}

#[cfg(test)]
mod tests;
