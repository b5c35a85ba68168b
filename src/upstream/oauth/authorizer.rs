//! One HTTP request of a session with an OAuth token: sent with the token held; on a 401, sent
//! again once with a renewed token; on a 403 `insufficient_scope`, sent again with more scope
//! while the grant may ask for it. When there is no usable token, the request fails with rmcp's
//! "authorization required" and the session's [`AuthFault`] says why.

use std::future::Future;

use rmcp::transport::{
    auth::{AuthError, WWWAuthenticateParams},
    streamable_http_client::StreamableHttpError,
};
use secrecy::{ExposeSecret, SecretString};
use url::Url;

use super::{Bearer, scopes::MAX_STEP_UPS};
use crate::{
    domain::outcome::{NoStepUp, OAuthFailure},
    upstream::transport::faults::AuthFault,
};

type Result<T> = std::result::Result<T, StreamableHttpError<reqwest::Error>>;

/// A session's token source and where it reports why a request had none.
#[derive(Clone)]
pub struct Authorizer {
    bearer: Bearer,
    fault: AuthFault,
    /// The server's URL, against which a challenge's relative URLs resolve.
    url: Url,
}

impl Authorizer {
    /// Requests to `url` with tokens from `bearer`; failures recorded in `fault`.
    pub fn new(bearer: Bearer, fault: AuthFault, url: Url) -> Self {
        Self { bearer, fault, url }
    }

    /// The token to send now, or why there is none (also recorded).
    pub async fn token(&self) -> std::result::Result<SecretString, OAuthFailure> {
        self.bearer.token().await.inspect_err(|failure| {
            self.fault.set(failure.clone());
        })
    }

    /// Sends a request by `send` (given the token) until the server accepts its token, or the
    /// token cannot be renewed or stepped up.
    pub async fn send<T, Fut>(&self, send: impl Fn(String) -> Fut) -> Result<T>
    where
        Fut: Future<Output = Result<T>>,
    {
        let mut token = self.token().await.map_err(|_| no_token())?;
        let mut renewed = false;
        let mut step_ups = 0;
        loop {
            let refusal = match send(token.expose_secret().to_owned()).await {
                Err(StreamableHttpError::AuthRequired(refusal)) => {
                    let challenge = self.parse(&refusal.www_authenticate_header);
                    if renewed {
                        return Err(self.failed(OAuthFailure::Refused {
                            error: challenge.error,
                            description: challenge.error_description,
                        }));
                    }
                    renewed = true;
                    self.bearer.renew(&token).await
                }
                Err(StreamableHttpError::InsufficientScope(refusal)) => {
                    let challenge = self.parse(&refusal.www_authenticate_header);
                    if challenge.error.as_deref() != Some("insufficient_scope") {
                        // A 403 for another reason: the token is fine, the server says no.
                        return Err(self.failed(OAuthFailure::Forbidden {
                            error: challenge.error,
                            description: challenge.error_description,
                        }));
                    }
                    let required = refusal.required_scope.or(challenge.scope);
                    if step_ups == MAX_STEP_UPS {
                        return Err(self.failed(OAuthFailure::InsufficientScope {
                            required,
                            why: NoStepUp::Limit(MAX_STEP_UPS),
                        }));
                    }
                    step_ups += 1;
                    self.bearer.step_up(required.as_deref(), &token).await
                }
                answer => {
                    if answer.is_ok() {
                        self.fault.clear();
                    }
                    return answer;
                }
            };
            token = refusal.map_err(|failure| self.failed(failure))?;
        }
    }

    fn parse(&self, header: &str) -> WWWAuthenticateParams {
        WWWAuthenticateParams::parse(header, &self.url)
    }

    fn failed(&self, failure: OAuthFailure) -> StreamableHttpError<reqwest::Error> {
        self.fault.set(failure);
        no_token()
    }
}

/// What rmcp's client is told when a request had no usable token: the fault channel says why.
fn no_token() -> StreamableHttpError<reqwest::Error> {
    StreamableHttpError::Auth(AuthError::AuthorizationRequired)
}
