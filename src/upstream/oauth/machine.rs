//! The client-credentials grant: the broker's own identity at the server's authorization server,
//! by a secret (`client_secret_basic` or `_post`, as the server advertises) or a signed
//! assertion (`private_key_jwt`). Discovery runs once and again after a failure; the scope is
//! the configured one, else the challenge's, else the resource's `scopes_supported`.

use oauth2::TokenResponse as _;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, ClientCredentialsConfig, OAuthTokenResponse,
};
use url::Url;

use super::{
    Held, TOKEN_DEADLINE,
    discovery::{challenge, discover},
    failures::from_auth,
    key,
    scopes::ScopeLadder,
};
use crate::{
    domain::{
        config::{Client, ClientAuth},
        names::ServerName,
        outcome::{OAuthFailure, TokenStep},
    },
    upstream::transport::http,
};

/// `offline_access` asks for refresh tokens, which this grant has no use for.
const OFFLINE_ACCESS: &str = "offline_access";

/// One server's client-credentials grant.
pub(super) struct Machine {
    server: ServerName,
    url: Url,
    client: Client,
    scopes: Vec<String>,
    ladder: ScopeLadder,
    /// The manager discovery set up; dropped after a failure, so that the next attempt
    /// discovers again (the authorization server may have moved).
    manager: tokio::sync::Mutex<Option<AuthorizationManager>>,
}

impl Machine {
    pub(super) fn new(server: ServerName, url: Url, client: Client, scopes: Vec<String>) -> Self {
        Self {
            server,
            url,
            client,
            scopes,
            ladder: ScopeLadder::default(),
            manager: tokio::sync::Mutex::new(None),
        }
    }

    /// A new token.
    pub(super) async fn acquire(&self) -> Result<Held, OAuthFailure> {
        let mut slot = self.manager.lock().await;
        let manager = match slot.take() {
            Some(manager) => manager,
            None => self.discover().await?,
        };
        let (manager, held) = self.grant(manager).await;
        if held.is_ok() {
            *slot = manager;
        }
        held
    }

    /// A new token with the scope `required` too, unless asking cannot help.
    pub(super) async fn step_up(
        &self,
        required: Option<&str>,
        granted: &[String],
    ) -> Result<Held, OAuthFailure> {
        self.ladder
            .climb(required, granted)
            .map_err(|why| OAuthFailure::InsufficientScope {
                required: required.map(str::to_owned),
                why,
            })?;
        self.acquire().await
    }

    async fn discover(&self) -> Result<AuthorizationManager, OAuthFailure> {
        let client = http::client().map_err(|e| OAuthFailure::Discovery(e.to_string()))?;
        let challenge = challenge(&client, &self.url, Default::default(), &self.server).await?;
        Ok(discover(&self.url, challenge).await?.manager)
    }

    /// A token from `manager`'s authorization server, and the manager back (unless lost).
    async fn grant(
        &self,
        mut manager: AuthorizationManager,
    ) -> (Option<AuthorizationManager>, Result<Held, OAuthFailure>) {
        let (config, asked) = match self.configure(&mut manager).await {
            Ok(request) => request,
            Err(failure) => return (Some(manager), Err(failure)),
        };
        let (manager, response) = exchange(manager, config).await;
        let held = response
            .map_err(|e| from_auth(TokenStep::ClientCredentials, e))
            .map(|response| {
                let granted = response
                    .scopes()
                    .map(|granted| granted.iter().map(|s| s.to_string()).collect())
                    .unwrap_or(asked);
                tracing::debug!(server = %self.server, scopes = ?granted,
                    "client credentials token issued");
                Held::new(
                    response.access_token().secret().clone(),
                    response.expires_in(),
                    granted,
                )
            });
        (manager, held)
    }

    /// The grant's request and the scope it asks for, with `manager` set up for it.
    async fn configure(
        &self,
        manager: &mut AuthorizationManager,
    ) -> Result<(ClientCredentialsConfig, Vec<String>), OAuthFailure> {
        let fail = |e| from_auth(TokenStep::ClientCredentials, e);
        let base = if self.scopes.is_empty() {
            let mut chosen = manager.select_initial_scopes(&[]).await;
            chosen.retain(|scope| scope != OFFLINE_ACCESS);
            chosen
        } else {
            self.scopes.clone()
        };
        let scopes = self.ladder.on(&base);
        let client_id = self.client.id.clone();
        let resource = Some(self.url.to_string());
        let config = match &self.client.auth {
            ClientAuth::Secret(secret) => ClientCredentialsConfig::ClientSecret {
                client_id,
                client_secret: secret.expose().to_owned(),
                scopes: scopes.clone(),
                resource,
            },
            ClientAuth::PrivateKey(private_key) => {
                let signing = key::load(private_key).map_err(|reason| OAuthFailure::Key {
                    file: private_key.file.clone(),
                    reason,
                })?;
                ClientCredentialsConfig::PrivateKeyJwt {
                    client_id,
                    signing_key: signing.pem,
                    signing_algorithm: key::rmcp_algorithm(signing.algorithm),
                    token_endpoint_audience: None,
                    scopes: scopes.clone(),
                    resource,
                }
            }
        };
        manager
            .validate_client_credentials_metadata(&config)
            .map_err(fail)?;
        manager
            .configure_client_credentials(&config)
            .map_err(fail)?;
        Ok((config, scopes))
    }
}

/// The token request. rmcp's `private_key_jwt` request holds a value that is not `Send` across
/// an await (a `form_urlencoded::Serializer`), so it runs on a blocking thread, driven by the
/// runtime's handle; the manager comes back unless that thread failed.
async fn exchange(
    manager: AuthorizationManager,
    config: ClientCredentialsConfig,
) -> (
    Option<AuthorizationManager>,
    Result<OAuthTokenResponse, AuthError>,
) {
    let runtime = tokio::runtime::Handle::current();
    let request = tokio::task::spawn_blocking(move || {
        // Bounded here too: the thread is not stopped when the waiting request gives up.
        let response = runtime.block_on(async {
            tokio::time::timeout(TOKEN_DEADLINE, manager.exchange_client_credentials(&config))
                .await
                .unwrap_or_else(|_| {
                    Err(AuthError::InternalError(format!(
                        "the token endpoint did not answer within {} s",
                        TOKEN_DEADLINE.as_secs()
                    )))
                })
        });
        (manager, response)
    });
    match request.await {
        Ok((manager, response)) => (Some(manager), response),
        Err(failed) => (
            None,
            Err(AuthError::InternalError(format!(
                "the token request's thread failed: {failed}"
            ))),
        ),
    }
}
