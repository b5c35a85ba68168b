//! An OAuth 2.1 authorization server of the tests' own on 127.0.0.1, for the broker as an OAuth
//! client of a protected MCP server (see `python.rs` for that server). It implements, strictly:
//!
//! - RFC 8414 metadata at `/.well-known/oauth-authorization-server` (the issuer is its base URL,
//!   `http://127.0.0.1:PORT`, no trailing slash);
//! - `/token` (RFC 6749 §5.2 errors as JSON): `client_credentials`, `authorization_code` (PKCE
//!   S256 checked, the redirect URI and the client too; codes are single-use, valid a minute) and
//!   `refresh_token` (rotated: the old refresh token stops working). Clients authenticate with
//!   `client_secret_basic` (id and secret form-urlencoded before base64, RFC 6749 §2.3.1, and
//!   decoded so here: a client that does not encode a secret with `+`, `%`, ... is refused),
//!   `client_secret_post`, `private_key_jwt` (RFC 7523: iss = sub = client id, aud = the issuer
//!   with or without a trailing slash or the token endpoint, exp in the future, RS256 or ES256,
//!   a `jti` used twice is refused) or `none` (public clients). Every token request must carry
//!   one `resource` (RFC 8707) that is one of [`Options::resources`], else `invalid_target`; a
//!   parameter given twice is `invalid_request`. Access tokens are opaque and random;
//!   authorization codes give a refresh token too, client credentials do not;
//! - `/authorize`: approves at once (no login page): checks the client, the redirect URI (an
//!   exact registered one, or a loopback `http` one on any port, RFC 8252 §7.3), `response_type`
//!   `code`, an S256 `code_challenge`, a `state` and the `resource`, then answers 302 to
//!   `redirect_uri?code=...&state=...&iss=<issuer>` (RFC 9207). An unknown client or a bad
//!   redirect URI is a 400 page, not a redirect;
//! - `/register` (RFC 7591 dynamic client registration, unless [`Options::dynamic_registration`]
//!   is off): a new client id, and a secret unless `token_endpoint_auth_method` is `none`; a
//!   `private_key_jwt` client registers its public keys as `jwks`. A registered client must use
//!   the method it registered;
//! - `/introspect` (RFC 7662), without client authentication: `{active: true, client_id, scope,
//!   exp, iat, aud (the resource), sub, iss, token_type}` or `{active: false}`. It knows access
//!   tokens only (a refresh token is inactive there).
//!
//! Tests steer it: [`OAuthServer::set_down`] answers 503 at `/token`, [`OAuthServer::stop`]
//! closes the port (connections refused) until [`OAuthServer::resume`] listens on it again,
//! [`OAuthServer::revoke_all`] ends every access token, [`OAuthServer::set_token_lifetime`]
//! changes the `expires_in` of the next tokens, [`OAuthServer::set_token_delay`] makes `/token`
//! answer late (a window for concurrent requests to meet in); what clients asked is recorded
//! ([`OAuthServer::token_requests`], [`OAuthServer::authorize_requests`],
//! [`OAuthServer::registrations`]).

use std::{
    collections::{HashMap, HashSet},
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{RawQuery, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::{sync::oneshot, task::JoinHandle};

use super::WAIT;

/// The token endpoint client authentication methods advertised by default.
pub const DEFAULT_AUTH_METHODS: [&str; 4] = [
    "client_secret_basic",
    "client_secret_post",
    "private_key_jwt",
    "none",
];
/// The subject (resource owner) of tokens from the authorization code flow: `/authorize`
/// approves as this user.
pub const USER: &str = "test-user";
/// `client_assertion_type` of RFC 7523 client authentication.
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// A client known from the start.
#[derive(Clone, Debug)]
pub struct Client {
    /// Its client id.
    pub id: String,
    /// Its secret, for `client_secret_basic` and `client_secret_post`.
    pub secret: Option<String>,
    /// Its public key (PEM, RSA or EC P-256), for `private_key_jwt`.
    pub public_key_pem: Option<String>,
    /// Its redirect URIs. Loopback ones match any port; none at all accepts any loopback URI.
    pub redirect_uris: Vec<String>,
    /// The only client authentication method it may use; `None`: any its credentials allow.
    pub auth_method: Option<String>,
}

impl Client {
    /// A confidential client with a secret.
    pub fn confidential(id: &str, secret: &str) -> Self {
        Self {
            secret: Some(secret.into()),
            ..Self::public(id)
        }
    }

    /// A client authenticating with a JWT signed by the private half of `public_key_pem`.
    pub fn private_key_jwt(id: &str, public_key_pem: &str) -> Self {
        Self {
            public_key_pem: Some(public_key_pem.into()),
            ..Self::public(id)
        }
    }

    /// A public client (`none`: no credentials; authorization code flow only).
    pub fn public(id: &str) -> Self {
        Self {
            id: id.into(),
            secret: None,
            public_key_pem: None,
            redirect_uris: Vec::new(),
            auth_method: None,
        }
    }

    /// Adds a redirect URI.
    pub fn redirect_uri(mut self, uri: &str) -> Self {
        self.redirect_uris.push(uri.into());
        self
    }
}

/// How to start an [`OAuthServer`].
#[derive(Clone, Debug)]
pub struct Options {
    /// The clients known from the start.
    pub clients: Vec<Client>,
    /// The resource indicators (RFC 8707) tokens may be asked for; more with
    /// [`OAuthServer::add_resource`] (a server started later, on a port not known yet).
    pub resources: Vec<String>,
    /// `scopes_supported`; when not empty, a request for another scope is `invalid_scope`.
    pub scopes_supported: Vec<String>,
    /// The scope granted when a request asks for none.
    pub default_scope: Option<String>,
    /// `token_endpoint_auth_methods_supported`; another method is refused (`invalid_client`).
    pub auth_methods: Vec<String>,
    /// The lifetime of access tokens (`expires_in`, rounded up to whole seconds).
    pub token_lifetime: Duration,
    /// What `expires_in` says instead, when the test wants it to lie (the tokens still end
    /// after `token_lifetime`).
    pub advertised_expires_in: Option<u64>,
    /// Whether `/register` exists (and is in the metadata).
    pub dynamic_registration: bool,
    /// Whether `/authorize` requires a `resource` (the MCP authorization spec says clients
    /// MUST send it there too).
    pub require_resource_at_authorize: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            clients: Vec::new(),
            resources: Vec::new(),
            scopes_supported: Vec::new(),
            default_scope: None,
            auth_methods: DEFAULT_AUTH_METHODS.iter().map(|m| m.to_string()).collect(),
            token_lifetime: Duration::from_secs(3600),
            advertised_expires_in: None,
            dynamic_registration: true,
            require_resource_at_authorize: true,
        }
    }
}

/// One request to `/token`, as received.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenRequest {
    /// `grant_type`.
    pub grant_type: Option<String>,
    /// How the client authenticated (`client_secret_basic`, `client_secret_post`,
    /// `private_key_jwt` or `none`); `None` when it sent no credentials at all.
    pub auth_method: Option<String>,
    /// The client id, authenticated or not.
    pub client_id: Option<String>,
    /// `resource` (the first, if several).
    pub resource: Option<String>,
    /// `scope`.
    pub scope: Option<String>,
    /// The error answered (`invalid_client`, ...), `None` for a token.
    pub error: Option<String>,
}

/// One request to `/authorize`, as received.
#[derive(Clone, Debug, PartialEq)]
pub struct AuthorizeRequest {
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub scope: Option<String>,
    pub resource: Option<String>,
    pub state: Option<String>,
    pub code_challenge_method: Option<String>,
    /// The error answered, `None` for a code.
    pub error: Option<String>,
}

/// A key pair for `private_key_jwt`: the client signs assertions with the private half, the
/// server knows the public half.
#[derive(Clone)]
pub struct ClientKey {
    /// `RS256` or `ES256`.
    pub algorithm: Algorithm,
    /// The private key, PKCS#8 PEM.
    pub private_pem: String,
    /// The public key, SPKI PEM (what [`Client::private_key_jwt`] takes).
    pub public_pem: String,
}

impl ClientKey {
    /// A new EC P-256 key (ES256).
    pub fn es256() -> Self {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a key");
        Self {
            algorithm: Algorithm::ES256,
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
        }
    }

    /// A new RSA key (RS256).
    pub fn rs256() -> Self {
        use rsa::{
            Generate,
            pkcs8::{EncodePrivateKey, EncodePublicKey},
        };
        let key = rsa::PrivateKey::generate();
        Self {
            algorithm: Algorithm::RS256,
            private_pem: key
                .to_pkcs8_pem(Default::default())
                .expect("PEM")
                .to_string(),
            public_pem: key
                .to_public_key()
                .to_public_key_pem(Default::default())
                .expect("PEM"),
        }
    }

    /// An RFC 7523 client assertion of `client_id` for `audience`, valid a minute, with a fresh
    /// `jti`.
    pub fn assertion(&self, client_id: &str, audience: &str) -> String {
        let now = epoch_secs();
        self.sign(&json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + 60,
            "jti": random(24),
        }))
    }

    /// `claims` signed with this key.
    pub fn sign(&self, claims: &Value) -> String {
        let key = match self.algorithm {
            Algorithm::ES256 => EncodingKey::from_ec_pem(self.private_pem.as_bytes()),
            _ => EncodingKey::from_rsa_pem(self.private_pem.as_bytes()),
        }
        .expect("a private key");
        jsonwebtoken::encode(&Header::new(self.algorithm), claims, &key).expect("signed")
    }

    /// The public key as a JWK (for dynamic registration with `jwks`).
    pub fn public_jwk(&self) -> Value {
        let key = match self.algorithm {
            Algorithm::ES256 => EncodingKey::from_ec_pem(self.private_pem.as_bytes()),
            _ => EncodingKey::from_rsa_pem(self.private_pem.as_bytes()),
        }
        .expect("a private key");
        let jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(&key, self.algorithm).expect("a JWK");
        serde_json::to_value(jwk).expect("a JWK serializes")
    }
}

/// A PKCE verifier (RFC 7636: 43 unreserved characters) and its S256 challenge.
pub fn pkce() -> (String, String) {
    let verifier = random(43);
    let challenge = s256(&verifier);
    (verifier, challenge)
}

/// The S256 code challenge of `verifier`.
pub fn s256(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// `value` form-urlencoded (RFC 6749 Appendix B), as in the HTTP Basic credentials of a client.
pub fn form_encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// The `Authorization` header value of `client_secret_basic` for `id` and `secret`.
pub fn basic_auth(id: &str, secret: &str) -> String {
    let credentials = format!("{}:{}", form_encode(id), form_encode(secret));
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(credentials)
    )
}

/// A running authorization server.
pub struct OAuthServer {
    /// The issuer: `http://127.0.0.1:PORT`.
    pub issuer: String,
    addr: SocketAddr,
    shared: Arc<Shared>,
    serving: Mutex<Option<(oneshot::Sender<()>, JoinHandle<()>)>>,
}

impl OAuthServer {
    /// Starts one on a free port.
    pub async fn start(options: Options) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let issuer = format!("http://{addr}");
        let mut clients = HashMap::new();
        for client in &options.clients {
            clients.insert(client.id.clone(), Registered::from_client(client));
        }
        let shared = Arc::new(Shared {
            issuer: issuer.clone(),
            state: Mutex::new(Inner {
                lifetime: options.token_lifetime,
                resources: options.resources.clone(),
                clients,
                options,
                ..Inner::default()
            }),
        });
        let server = Self {
            issuer,
            addr,
            shared,
            serving: Mutex::new(None),
        };
        server.serve(listener);
        server
    }

    /// Starts one with `clients`, for `resources`, with every other option at its default.
    pub async fn with_clients(clients: Vec<Client>, resources: &[&str]) -> Self {
        Self::start(Options {
            clients,
            resources: resources.iter().map(|r| r.to_string()).collect(),
            ..Options::default()
        })
        .await
    }

    fn serve(&self, listener: tokio::net::TcpListener) {
        let (stop, stopped) = oneshot::channel::<()>();
        let router = router(&self.shared);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        *self.serving.lock().unwrap() = Some((stop, task));
    }

    /// The metadata URL (RFC 8414).
    pub fn metadata_url(&self) -> String {
        format!("{}/.well-known/oauth-authorization-server", self.issuer)
    }

    /// The token endpoint.
    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.issuer)
    }

    /// The authorization endpoint.
    pub fn authorization_endpoint(&self) -> String {
        format!("{}/authorize", self.issuer)
    }

    /// The registration endpoint.
    pub fn registration_endpoint(&self) -> String {
        format!("{}/register", self.issuer)
    }

    /// The introspection endpoint.
    pub fn introspection_endpoint(&self) -> String {
        format!("{}/introspect", self.issuer)
    }

    /// Accepts tokens for `resource` from now on.
    pub fn add_resource(&self, resource: &str) {
        self.state().resources.push(resource.into());
    }

    /// While `down`, `/token` answers 503 `temporarily_unavailable` (the rest still works).
    pub fn set_down(&self, down: bool) {
        self.state().down = down;
    }

    /// Stops listening: connections to its port are refused until [`Self::resume`]. Requests
    /// in flight finish first.
    pub async fn stop(&self) {
        let serving = self.serving.lock().unwrap().take();
        if let Some((stop, task)) = serving {
            let _ = stop.send(());
            tokio::time::timeout(WAIT, task)
                .await
                .expect("the authorization server stops in time")
                .expect("its task ends well");
        }
    }

    /// Listens again on the same port, with everything it knew.
    pub async fn resume(&self) {
        assert!(self.serving.lock().unwrap().is_none(), "not stopped");
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .expect("the port of the authorization server is free again");
        self.serve(listener);
    }

    /// Ends every access token issued so far (introspection says inactive; refresh tokens still
    /// work).
    pub fn revoke_all(&self) {
        for token in self.state().access.values_mut() {
            token.revoked = true;
        }
    }

    /// The lifetime of the access tokens issued from now on.
    pub fn set_token_lifetime(&self, lifetime: Duration) {
        self.state().lifetime = lifetime;
    }

    /// `/token` waits this long before it handles a request, from now on.
    pub fn set_token_delay(&self, delay: Duration) {
        self.state().token_delay = delay;
    }

    /// Every request to `/token` so far, in order.
    pub fn token_requests(&self) -> Vec<TokenRequest> {
        self.state().token_requests.clone()
    }

    /// Every request to `/authorize` so far, in order.
    pub fn authorize_requests(&self) -> Vec<AuthorizeRequest> {
        self.state().authorize_requests.clone()
    }

    /// The body of every successful registration so far (what `/register` answered).
    pub fn registrations(&self) -> Vec<Value> {
        self.state().registrations.clone()
    }

    /// How many access tokens it issued.
    pub fn issued_tokens(&self) -> usize {
        self.state().issued
    }

    /// How many introspection requests it answered.
    pub fn introspections(&self) -> usize {
        self.state().introspections
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.shared.state.lock().unwrap()
    }
}

struct Shared {
    issuer: String,
    state: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    options: Options,
    lifetime: Duration,
    resources: Vec<String>,
    down: bool,
    token_delay: Duration,
    clients: HashMap<String, Registered>,
    codes: HashMap<String, Code>,
    access: HashMap<String, Access>,
    refresh: HashMap<String, Refresh>,
    jtis: HashSet<String>,
    token_requests: Vec<TokenRequest>,
    authorize_requests: Vec<AuthorizeRequest>,
    registrations: Vec<Value>,
    issued: usize,
    introspections: usize,
}

struct Registered {
    secret: Option<String>,
    keys: Vec<DecodingKey>,
    redirect_uris: Vec<String>,
    auth_method: Option<String>,
}

impl Registered {
    fn from_client(client: &Client) -> Self {
        let keys = client
            .public_key_pem
            .iter()
            .map(|pem| {
                DecodingKey::from_rsa_pem(pem.as_bytes())
                    .or_else(|_| DecodingKey::from_ec_pem(pem.as_bytes()))
                    .unwrap_or_else(|e| panic!("client {}: a public key PEM: {e}", client.id))
            })
            .collect();
        Self {
            secret: client.secret.clone(),
            keys,
            redirect_uris: client.redirect_uris.clone(),
            auth_method: client.auth_method.clone(),
        }
    }

    fn is_public(&self) -> bool {
        self.secret.is_none() && self.keys.is_empty()
    }
}

struct Code {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    scope: Option<String>,
    resource: Option<String>,
    expires: Instant,
}

struct Access {
    client_id: String,
    scope: Option<String>,
    resource: String,
    subject: String,
    issued_at: u64,
    exp: u64,
    expires: Instant,
    revoked: bool,
}

struct Refresh {
    client_id: String,
    scope: Option<String>,
    subject: String,
}

fn router(shared: &Arc<Shared>) -> Router {
    let dynamic_registration = shared.state.lock().unwrap().options.dynamic_registration;
    let mut router = Router::new()
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route("/introspect", post(introspect));
    if dynamic_registration {
        router = router.route("/register", post(register));
    }
    router.with_state(shared.clone())
}

async fn metadata(State(shared): State<Arc<Shared>>) -> Response {
    let state = shared.state.lock().unwrap();
    let issuer = &shared.issuer;
    let mut body = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "introspection_endpoint": format!("{issuer}/introspect"),
        "introspection_endpoint_auth_methods_supported": ["none"],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": state.options.auth_methods,
        "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256"],
        "authorization_response_iss_parameter_supported": true,
    });
    if !state.options.scopes_supported.is_empty() {
        body["scopes_supported"] = json!(state.options.scopes_supported);
    }
    if state.options.dynamic_registration {
        body["registration_endpoint"] = json!(format!("{issuer}/register"));
    }
    Json(body).into_response()
}

/// Form or query parameters, in order, repeated ones kept.
struct Params(Vec<(String, String)>);

impl Params {
    fn parse(bytes: &[u8]) -> Self {
        Self(url::form_urlencoded::parse(bytes).into_owned().collect())
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn count(&self, name: &str) -> usize {
        self.0.iter().filter(|(k, _)| k == name).count()
    }

    /// A parameter other than `resource` given more than once (RFC 6749 §3.1, §3.2).
    fn repeated(&self) -> Option<&str> {
        self.0
            .iter()
            .map(|(k, _)| k.as_str())
            .find(|k| *k != "resource" && self.count(k) > 1)
    }
}

/// An RFC 6749 §5.2 error.
struct Refusal {
    status: StatusCode,
    error: &'static str,
    description: String,
}

fn refuse(status: StatusCode, error: &'static str, description: impl Into<String>) -> Refusal {
    Refusal {
        status,
        error,
        description: description.into(),
    }
}

fn bad_request(error: &'static str, description: impl Into<String>) -> Refusal {
    refuse(StatusCode::BAD_REQUEST, error, description)
}

fn invalid_client(description: impl Into<String>) -> Refusal {
    refuse(StatusCode::UNAUTHORIZED, "invalid_client", description)
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [(header::CACHE_CONTROL, "no-store")],
            Json(json!({"error": self.error, "error_description": self.description})),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                "Basic realm=\"oauth\"".parse().unwrap(),
            );
        }
        response
    }
}

async fn token(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let params = Params::parse(&body);
    let mut record = TokenRequest {
        grant_type: params.get("grant_type").map(str::to_owned),
        auth_method: None,
        client_id: params.get("client_id").map(str::to_owned),
        resource: params.get("resource").map(str::to_owned),
        scope: params.get("scope").map(str::to_owned),
        error: None,
    };
    let delay = shared.state.lock().unwrap().token_delay;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut state = shared.state.lock().unwrap();
    let result = if state.down {
        Err(refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            "the authorization server is down (set_down)",
        ))
    } else {
        grant(&shared.issuer, &mut state, &headers, &params, &mut record)
    };
    let response = match result {
        Ok(body) => (
            [
                (header::CACHE_CONTROL, "no-store"),
                (header::PRAGMA, "no-cache"),
            ],
            Json(body),
        )
            .into_response(),
        Err(refusal) => {
            record.error = Some(refusal.error.to_owned());
            refusal.into_response()
        }
    };
    state.token_requests.push(record);
    response
}

fn grant(
    issuer: &str,
    state: &mut Inner,
    headers: &HeaderMap,
    params: &Params,
    record: &mut TokenRequest,
) -> Result<Value, Refusal> {
    if let Some(name) = params.repeated() {
        return Err(bad_request(
            "invalid_request",
            format!("parameter {name} given more than once"),
        ));
    }
    let client_id = authenticate(issuer, state, headers, params, record)?;
    let Some(grant_type) = params.get("grant_type") else {
        return Err(bad_request("invalid_request", "no grant_type"));
    };
    if !matches!(
        grant_type,
        "client_credentials" | "authorization_code" | "refresh_token"
    ) {
        return Err(bad_request(
            "unsupported_grant_type",
            format!("grant_type {grant_type} is not supported"),
        ));
    }
    let resource = match params.count("resource") {
        0 => {
            return Err(bad_request(
                "invalid_target",
                "no resource (RFC 8707) in the token request",
            ));
        }
        1 => params.get("resource").unwrap().to_owned(),
        _ => return Err(bad_request("invalid_target", "more than one resource")),
    };
    if !state.resources.contains(&resource) {
        return Err(bad_request(
            "invalid_target",
            format!("unknown resource {resource}; known: {:?}", state.resources),
        ));
    }
    match grant_type {
        "client_credentials" => {
            if state.clients[&client_id].is_public() {
                return Err(bad_request(
                    "unauthorized_client",
                    "a public client cannot use client_credentials",
                ));
            }
            let scope = requested_scope(state, params.get("scope"))?;
            let subject = client_id.clone();
            Ok(issue(state, &client_id, scope, resource, subject, false))
        }
        "authorization_code" => {
            let Some(code) = params.get("code") else {
                return Err(bad_request("invalid_request", "no code"));
            };
            // Single use: a code is gone once presented, even if the request fails.
            let Some(code) = state.codes.remove(code) else {
                return Err(bad_request("invalid_grant", "unknown or used code"));
            };
            if code.client_id != client_id {
                return Err(bad_request("invalid_grant", "code of another client"));
            }
            if code.expires < Instant::now() {
                return Err(bad_request("invalid_grant", "code expired"));
            }
            if params.get("redirect_uri") != Some(code.redirect_uri.as_str()) {
                return Err(bad_request(
                    "invalid_grant",
                    "redirect_uri differs from the authorization request's",
                ));
            }
            let Some(verifier) = params.get("code_verifier") else {
                return Err(bad_request("invalid_request", "no code_verifier"));
            };
            let well_formed = (43..=128).contains(&verifier.len())
                && verifier
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
            if !well_formed || s256(verifier) != code.challenge {
                return Err(bad_request(
                    "invalid_grant",
                    "code_verifier does not match the code_challenge",
                ));
            }
            if code.resource.as_ref().is_some_and(|r| *r != resource) {
                return Err(bad_request(
                    "invalid_target",
                    "resource differs from the authorization request's",
                ));
            }
            Ok(issue(
                state,
                &client_id,
                code.scope,
                resource,
                USER.into(),
                true,
            ))
        }
        _ => {
            let Some(refresh) = params.get("refresh_token") else {
                return Err(bad_request("invalid_request", "no refresh_token"));
            };
            if state
                .refresh
                .get(refresh)
                .is_some_and(|r| r.client_id != client_id)
            {
                return Err(bad_request(
                    "invalid_grant",
                    "refresh token of another client",
                ));
            }
            // Rotation: the refresh token presented is spent.
            let Some(old) = state.refresh.remove(refresh) else {
                return Err(bad_request(
                    "invalid_grant",
                    "unknown, rotated or revoked refresh token",
                ));
            };
            let scope = match params.get("scope") {
                None => old.scope,
                Some(asked) => {
                    let granted: HashSet<&str> =
                        old.scope.as_deref().unwrap_or("").split(' ').collect();
                    if let Some(extra) = asked.split(' ').find(|s| !granted.contains(s)) {
                        state.refresh.insert(refresh.to_owned(), old);
                        return Err(bad_request(
                            "invalid_scope",
                            format!("scope {extra} was not granted"),
                        ));
                    }
                    Some(asked.to_owned())
                }
            };
            Ok(issue(state, &client_id, scope, resource, old.subject, true))
        }
    }
}

/// Authenticates the client of a token request; returns its id.
fn authenticate(
    issuer: &str,
    state: &mut Inner,
    headers: &HeaderMap,
    params: &Params,
    record: &mut TokenRequest,
) -> Result<String, Refusal> {
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.split_once(' ')
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
                .map(|(_, credentials)| credentials.trim().to_owned())
        });
    let assertion = params.get("client_assertion");
    let posted_secret = params.get("client_secret");
    let methods = [
        basic.is_some(),
        assertion.is_some(),
        posted_secret.is_some(),
    ];
    if methods.iter().filter(|m| **m).count() > 1 {
        return Err(bad_request(
            "invalid_request",
            "more than one client authentication method",
        ));
    }
    let (method, client_id) = if let Some(credentials) = basic {
        record.auth_method = Some("client_secret_basic".into());
        let (id, secret) = decode_basic(&credentials)
            .ok_or_else(|| invalid_client("malformed Basic credentials"))?;
        record.client_id = Some(id.clone());
        check_method(state, "client_secret_basic", &id)?;
        check_secret(state, &id, &secret)?;
        ("client_secret_basic", id)
    } else if let Some(assertion) = assertion {
        record.auth_method = Some("private_key_jwt".into());
        if params.get("client_assertion_type") != Some(JWT_BEARER) {
            return Err(invalid_client(format!(
                "client_assertion_type must be {JWT_BEARER}"
            )));
        }
        let claims: Value = jsonwebtoken::dangerous::insecure_decode_claims(assertion)
            .map_err(|e| invalid_client(format!("client_assertion is not a JWT: {e}")))?;
        let id = match params.get("client_id") {
            Some(id) => id.to_owned(),
            None => claims["iss"]
                .as_str()
                .ok_or_else(|| invalid_client("client_assertion without iss"))?
                .to_owned(),
        };
        record.client_id = Some(id.clone());
        check_method(state, "private_key_jwt", &id)?;
        verify_assertion(issuer, state, &id, assertion)?;
        ("private_key_jwt", id)
    } else if let Some(secret) = posted_secret {
        record.auth_method = Some("client_secret_post".into());
        let id = params
            .get("client_id")
            .ok_or_else(|| invalid_client("client_secret without client_id"))?
            .to_owned();
        check_method(state, "client_secret_post", &id)?;
        check_secret(state, &id, secret)?;
        ("client_secret_post", id)
    } else if let Some(id) = params.get("client_id") {
        record.auth_method = Some("none".into());
        check_method(state, "none", id)?;
        if !state.clients[id].is_public() {
            return Err(invalid_client("a confidential client must authenticate"));
        }
        ("none", id.to_owned())
    } else {
        return Err(invalid_client("no client authentication"));
    };
    if params
        .get("client_id")
        .is_some_and(|id| id != client_id && method != "none")
    {
        return Err(invalid_client(
            "client_id differs from the authenticated client",
        ));
    }
    Ok(client_id)
}

/// Whether server and client allow `method`, and the client exists.
fn check_method(state: &Inner, method: &str, client_id: &str) -> Result<(), Refusal> {
    if !state.options.auth_methods.iter().any(|m| m == method) {
        return Err(invalid_client(format!(
            "{method} is not a supported client authentication method here"
        )));
    }
    let Some(client) = state.clients.get(client_id) else {
        return Err(invalid_client(format!("unknown client {client_id}")));
    };
    if let Some(allowed) = &client.auth_method
        && allowed != method
    {
        return Err(invalid_client(format!(
            "client {client_id} is registered for {allowed}, not {method}"
        )));
    }
    Ok(())
}

fn check_secret(state: &Inner, client_id: &str, secret: &str) -> Result<(), Refusal> {
    match &state.clients[client_id].secret {
        Some(expected) if expected == secret => Ok(()),
        Some(_) => Err(invalid_client("wrong client secret")),
        None => Err(invalid_client(format!("client {client_id} has no secret"))),
    }
}

/// `client_secret_basic` credentials: base64 of the form-urlencoded id, `:`, the form-urlencoded
/// secret.
fn decode_basic(credentials: &str) -> Option<(String, String)> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(credentials)
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    Some((form_decode(id)?, form_decode(secret)?))
}

/// Undoes `application/x-www-form-urlencoded` encoding of one value; `None` if malformed.
fn form_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn verify_assertion(
    issuer: &str,
    state: &mut Inner,
    client_id: &str,
    assertion: &str,
) -> Result<(), Refusal> {
    let header = jsonwebtoken::decode_header(assertion)
        .map_err(|e| invalid_client(format!("client_assertion header: {e}")))?;
    if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
        return Err(invalid_client(format!(
            "client_assertion alg {:?} is not RS256 or ES256",
            header.alg
        )));
    }
    let keys = &state.clients[client_id].keys;
    if keys.is_empty() {
        return Err(invalid_client(format!(
            "client {client_id} has no public key"
        )));
    }
    let mut validation = Validation::new(header.alg);
    validation.set_audience(&[
        issuer.to_owned(),
        format!("{issuer}/"),
        format!("{issuer}/token"),
    ]);
    validation.set_issuer(&[client_id]);
    validation.sub = Some(client_id.to_owned());
    validation.set_required_spec_claims(&["exp", "iss", "sub", "aud"]);
    validation.leeway = 5;
    let mut last_error = None;
    for key in keys {
        match jsonwebtoken::decode::<Value>(assertion, key, &validation) {
            Ok(data) => {
                if let Some(jti) = data.claims["jti"].as_str()
                    && !state.jtis.insert(format!("{client_id}\n{jti}"))
                {
                    return Err(invalid_client(format!(
                        "client_assertion jti {jti} was used before"
                    )));
                }
                return Ok(());
            }
            Err(e) => last_error = Some(e),
        }
    }
    Err(invalid_client(format!(
        "client_assertion refused: {}",
        last_error.expect("a key was tried")
    )))
}

fn requested_scope(state: &Inner, asked: Option<&str>) -> Result<Option<String>, Refusal> {
    let Some(asked) = asked.filter(|s| !s.trim().is_empty()) else {
        return Ok(state.options.default_scope.clone());
    };
    let supported = &state.options.scopes_supported;
    if !supported.is_empty()
        && let Some(unknown) = asked.split(' ').find(|s| !supported.iter().any(|k| k == s))
    {
        return Err(bad_request(
            "invalid_scope",
            format!("unknown scope {unknown}"),
        ));
    }
    Ok(Some(asked.to_owned()))
}

fn issue(
    state: &mut Inner,
    client_id: &str,
    scope: Option<String>,
    resource: String,
    subject: String,
    with_refresh: bool,
) -> Value {
    let lifetime = state.lifetime;
    let expires_in = lifetime.as_secs() + u64::from(lifetime.subsec_nanos() > 0);
    let token = random(40);
    let now = epoch_secs();
    state.access.insert(
        token.clone(),
        Access {
            client_id: client_id.to_owned(),
            scope: scope.clone(),
            resource,
            subject: subject.clone(),
            issued_at: now,
            exp: now + expires_in,
            expires: Instant::now() + lifetime,
            revoked: false,
        },
    );
    state.issued += 1;
    let mut body = json!({
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": state.options.advertised_expires_in.unwrap_or(expires_in),
    });
    if let Some(scope) = &scope {
        body["scope"] = json!(scope);
    }
    if with_refresh {
        let refresh = random(40);
        state.refresh.insert(
            refresh.clone(),
            Refresh {
                client_id: client_id.to_owned(),
                scope,
                subject,
            },
        );
        body["refresh_token"] = json!(refresh);
    }
    body
}

async fn introspect(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let params = Params::parse(&body);
    let mut state = shared.state.lock().unwrap();
    state.introspections += 1;
    let Some(token) = params.get("token") else {
        return bad_request("invalid_request", "no token").into_response();
    };
    let body = match state.access.get(token) {
        Some(access) if !access.revoked && access.expires > Instant::now() => {
            let mut body = json!({
                "active": true,
                "client_id": access.client_id,
                "token_type": "Bearer",
                "exp": access.exp,
                "iat": access.issued_at,
                "aud": access.resource,
                "sub": access.subject,
                "iss": shared.issuer,
            });
            if let Some(scope) = &access.scope {
                body["scope"] = json!(scope);
            }
            body
        }
        _ => json!({"active": false}),
    };
    Json(body).into_response()
}

async fn authorize(State(shared): State<Arc<Shared>>, RawQuery(query): RawQuery) -> Response {
    let params = Params::parse(query.unwrap_or_default().as_bytes());
    let field = |name: &str| params.get(name).map(str::to_owned);
    let mut record = AuthorizeRequest {
        client_id: field("client_id"),
        redirect_uri: field("redirect_uri"),
        scope: field("scope"),
        resource: field("resource"),
        state: field("state"),
        code_challenge_method: field("code_challenge_method"),
        error: None,
    };
    let mut state = shared.state.lock().unwrap();
    let response = match authorization(&shared.issuer, &mut state, &params) {
        Ok(location) => redirect(&location),
        Err((refusal, None)) => {
            record.error = Some(refusal.error.to_owned());
            refusal.into_response()
        }
        Err((refusal, Some(redirect_uri))) => {
            record.error = Some(refusal.error.to_owned());
            let mut location = url::Url::parse(&redirect_uri).expect("checked");
            location
                .query_pairs_mut()
                .append_pair("error", refusal.error)
                .append_pair("error_description", &refusal.description)
                .append_pair("iss", &shared.issuer);
            if let Some(s) = params.get("state") {
                location.query_pairs_mut().append_pair("state", s);
            }
            redirect(location.as_str())
        }
    };
    state.authorize_requests.push(record);
    response
}

fn redirect(location: &str) -> Response {
    (
        StatusCode::FOUND,
        [
            (header::LOCATION, location.to_owned()),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
    )
        .into_response()
}

/// The redirect location of an approved authorization request; or its refusal, with the
/// redirect URI to send it to when that URI could be trusted.
fn authorization(
    issuer: &str,
    state: &mut Inner,
    params: &Params,
) -> Result<String, (Refusal, Option<String>)> {
    if let Some(name) = params.repeated() {
        return Err((
            bad_request(
                "invalid_request",
                format!("parameter {name} given more than once"),
            ),
            None,
        ));
    }
    let Some(client_id) = params.get("client_id") else {
        return Err((bad_request("invalid_request", "no client_id"), None));
    };
    let Some(client) = state.clients.get(client_id) else {
        return Err((
            bad_request("invalid_request", format!("unknown client {client_id}")),
            None,
        ));
    };
    let Some(redirect_uri) = params.get("redirect_uri") else {
        return Err((bad_request("invalid_request", "no redirect_uri"), None));
    };
    if !redirect_allowed(&client.redirect_uris, redirect_uri) {
        return Err((
            bad_request(
                "invalid_request",
                format!("redirect_uri {redirect_uri} is not registered for {client_id}"),
            ),
            None,
        ));
    }
    let back = |refusal: Refusal| (refusal, Some(redirect_uri.to_owned()));
    if params.get("response_type") != Some("code") {
        return Err(back(bad_request(
            "unsupported_response_type",
            "response_type must be code",
        )));
    }
    let Some(challenge) = params.get("code_challenge") else {
        return Err(back(bad_request(
            "invalid_request",
            "no code_challenge (PKCE is required)",
        )));
    };
    if params.get("code_challenge_method") != Some("S256") {
        return Err(back(bad_request(
            "invalid_request",
            "code_challenge_method must be S256",
        )));
    }
    let Some(request_state) = params.get("state").filter(|s| !s.is_empty()) else {
        return Err(back(bad_request("invalid_request", "no state")));
    };
    let resource = match params.count("resource") {
        0 if state.options.require_resource_at_authorize => {
            return Err(back(bad_request(
                "invalid_target",
                "no resource (RFC 8707) in the authorization request",
            )));
        }
        0 => None,
        1 => Some(params.get("resource").unwrap().to_owned()),
        _ => {
            return Err(back(bad_request(
                "invalid_target",
                "more than one resource",
            )));
        }
    };
    if let Some(resource) = &resource
        && !state.resources.contains(resource)
    {
        return Err(back(bad_request(
            "invalid_target",
            format!("unknown resource {resource}"),
        )));
    }
    let scope = requested_scope(state, params.get("scope")).map_err(back)?;
    let code = random(32);
    state.codes.insert(
        code.clone(),
        Code {
            client_id: client_id.to_owned(),
            redirect_uri: redirect_uri.to_owned(),
            challenge: challenge.to_owned(),
            scope,
            resource,
            expires: Instant::now() + Duration::from_secs(60),
        },
    );
    let mut location = url::Url::parse(redirect_uri).expect("checked");
    location
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", request_state)
        .append_pair("iss", issuer);
    Ok(location.into())
}

/// Whether `uri` is one of `registered`, or a loopback `http` URI that differs from one only by
/// its port (RFC 8252 §7.3); with nothing registered, any loopback `http` URI.
fn redirect_allowed(registered: &[String], uri: &str) -> bool {
    let Ok(asked) = url::Url::parse(uri) else {
        return false;
    };
    if asked.fragment().is_some() {
        return false;
    }
    if registered.is_empty() {
        return is_loopback_http(&asked);
    }
    registered.iter().any(|r| {
        r == uri
            || url::Url::parse(r).is_ok_and(|r| {
                is_loopback_http(&r)
                    && is_loopback_http(&asked)
                    && r.host() == asked.host()
                    && r.path() == asked.path()
                    && r.query() == asked.query()
            })
    })
}

fn is_loopback_http(url: &url::Url) -> bool {
    url.scheme() == "http"
        && match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(d)) => d == "localhost",
            None => false,
        }
}

async fn register(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let mut state = shared.state.lock().unwrap();
    match registration(&mut state, &body) {
        Ok(answer) => {
            state.registrations.push(answer.clone());
            (
                StatusCode::CREATED,
                [(header::CACHE_CONTROL, "no-store")],
                Json(answer),
            )
                .into_response()
        }
        Err(refusal) => refusal.into_response(),
    }
}

fn registration(state: &mut Inner, body: &[u8]) -> Result<Value, Refusal> {
    let metadata: Value = serde_json::from_slice(body)
        .map_err(|e| bad_request("invalid_client_metadata", format!("not JSON: {e}")))?;
    if !metadata.is_object() {
        return Err(bad_request("invalid_client_metadata", "not a JSON object"));
    }
    let strings = |name: &str| -> Result<Option<Vec<String>>, Refusal> {
        match &metadata[name] {
            Value::Null => Ok(None),
            value => serde_json::from_value(value.clone())
                .map(Some)
                .map_err(|_| {
                    bad_request(
                        "invalid_client_metadata",
                        format!("{name} is not a list of strings"),
                    )
                }),
        }
    };
    let redirect_uris = strings("redirect_uris")?.unwrap_or_default();
    let grant_types =
        strings("grant_types")?.unwrap_or_else(|| vec!["authorization_code".to_owned()]);
    let response_types = strings("response_types")?.unwrap_or_else(|| vec!["code".to_owned()]);
    let method = match &metadata["token_endpoint_auth_method"] {
        Value::Null => "client_secret_basic".to_owned(),
        Value::String(m) => m.clone(),
        _ => {
            return Err(bad_request(
                "invalid_client_metadata",
                "token_endpoint_auth_method is not a string",
            ));
        }
    };
    if !state.options.auth_methods.contains(&method) {
        return Err(bad_request(
            "invalid_client_metadata",
            format!("token_endpoint_auth_method {method} is not supported"),
        ));
    }
    if let Some(grant) = grant_types.iter().find(|g| {
        !matches!(
            g.as_str(),
            "authorization_code" | "refresh_token" | "client_credentials"
        )
    }) {
        return Err(bad_request(
            "invalid_client_metadata",
            format!("grant type {grant} is not supported"),
        ));
    }
    if method == "none" && grant_types.iter().any(|g| g == "client_credentials") {
        return Err(bad_request(
            "invalid_client_metadata",
            "a public client cannot use client_credentials",
        ));
    }
    if grant_types.iter().any(|g| g == "authorization_code") {
        if redirect_uris.is_empty() {
            return Err(bad_request(
                "invalid_redirect_uri",
                "the authorization_code grant needs redirect_uris",
            ));
        }
        if let Some(bad) = redirect_uris.iter().find(|u| {
            url::Url::parse(u).map_or(true, |u| {
                u.fragment().is_some() || !(u.scheme() == "https" || is_loopback_http(&u))
            })
        }) {
            return Err(bad_request(
                "invalid_redirect_uri",
                format!("redirect URI {bad} is not https or loopback http"),
            ));
        }
    }
    let mut keys = Vec::new();
    if method == "private_key_jwt" {
        let jwks: jsonwebtoken::jwk::JwkSet = serde_json::from_value(metadata["jwks"].clone())
            .map_err(|e| {
                bad_request(
                    "invalid_client_metadata",
                    format!("private_key_jwt needs jwks: {e}"),
                )
            })?;
        for jwk in &jwks.keys {
            keys.push(DecodingKey::from_jwk(jwk).map_err(|e| {
                bad_request("invalid_client_metadata", format!("a key of jwks: {e}"))
            })?);
        }
        if keys.is_empty() {
            return Err(bad_request("invalid_client_metadata", "jwks has no keys"));
        }
    }
    let client_id = format!("dcr-{}", random(16));
    let secret = matches!(
        method.as_str(),
        "client_secret_basic" | "client_secret_post"
    )
    .then(|| random(32));
    let mut answer = metadata.clone();
    answer["client_id"] = json!(client_id);
    answer["client_id_issued_at"] = json!(epoch_secs());
    answer["token_endpoint_auth_method"] = json!(method);
    answer["grant_types"] = json!(grant_types);
    answer["response_types"] = json!(response_types);
    answer["redirect_uris"] = json!(redirect_uris);
    if let Some(secret) = &secret {
        answer["client_secret"] = json!(secret);
        answer["client_secret_expires_at"] = json!(0);
    }
    state.clients.insert(
        client_id,
        Registered {
            secret,
            keys,
            redirect_uris,
            auth_method: Some(method),
        },
    );
    Ok(answer)
}

/// `len` random letters and digits.
fn random(len: usize) -> String {
    std::iter::repeat_with(fastrand::alphanumeric)
        .take(len)
        .collect()
}

fn epoch_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Runs `toolbroker login remote --config CONFIG --no-browser` with `env`, follows its URL as a
/// browser would (the authorization server approves at once and redirects to login's
/// listener), waits for it to exit 0, and returns what it said on stderr.
pub async fn login(config: &std::path::Path, env: &[(&str, &str)]) -> String {
    use tokio::io::AsyncBufReadExt as _;
    let mut child = tokio::process::Command::new(super::toolbroker_bin())
        .args(["login", "remote", "--no-browser", "--config"])
        .arg(config)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let url = tokio::time::timeout(super::STARTUP, lines.next_line())
        .await
        .expect("login printed its URL in time")
        .unwrap()
        .expect("login printed a URL");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let approved = browser.get(&url).send().await.unwrap();
    assert_eq!(approved.status(), 302, "{url}");
    let location = approved.headers()["location"].to_str().unwrap().to_owned();
    let landing = browser.get(&location).send().await.unwrap();
    assert!(landing.status().is_success(), "{location}");
    let output = tokio::time::timeout(super::STARTUP, child.wait_with_output())
        .await
        .expect("login exited in time")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "login: {stderr}");
    stderr
}
