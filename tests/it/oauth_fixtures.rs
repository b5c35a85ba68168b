//! The OAuth fixtures, checked on their own (no broker): the authorization server of
//! tests/common/oauth_server.rs and the protected MCP server of tests/python/oauth_mcp_server.py
//! (the Python `mcp` SDK), spoken to with reqwest and rmcp's streamable HTTP client.

use std::time::{Duration, Instant};

use crate::common::{
    self, WAIT,
    oauth_server::{Client, ClientKey, JWT_BEARER, OAuthServer, Options, USER, basic_auth, pkce},
    python::OAuthMcpServer,
};
use reqwest::{StatusCode, header::HeaderMap};
use rmcp::{
    RoleClient, ServiceExt,
    model::CallToolRequestParams,
    service::RunningService,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};

const BASIC_ID: &str = "basic-client";
/// Needs form-urlencoding in HTTP Basic (RFC 6749 §2.3.1): `+`, `/`, `&`, `:`, `%` and non-ASCII.
const BASIC_SECRET: &str = "s3cr+t/&:%é";
const POST_ID: &str = "post-client";
const POST_SECRET: &str = "post-secret";
const ES_ID: &str = "es256-client";
const RS_ID: &str = "rs256-client";

struct Keys {
    es: ClientKey,
    rs: ClientKey,
}

/// An authorization server with a client per authentication method, scopes `mcp` (granted when
/// none is asked) and `admin`, and a protected MCP server requiring `required`.
async fn setup(required: &[&str]) -> (OAuthServer, OAuthMcpServer, Keys) {
    let keys = Keys {
        es: ClientKey::es256(),
        rs: ClientKey::rs256(),
    };
    let oauth = OAuthServer::start(Options {
        clients: vec![
            Client::confidential(BASIC_ID, BASIC_SECRET),
            Client::confidential(POST_ID, POST_SECRET),
            Client::private_key_jwt(ES_ID, &keys.es.public_pem),
            Client::private_key_jwt(RS_ID, &keys.rs.public_pem),
        ],
        scopes_supported: vec!["mcp".into(), "admin".into()],
        default_scope: Some("mcp".into()),
        ..Options::default()
    })
    .await;
    let server = OAuthMcpServer::protected_by(&oauth, required).await;
    (oauth, server, keys)
}

/// A client that does not follow redirects.
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(WAIT)
        .build()
        .unwrap()
}

/// What the authorization server's introspection says of `token`.
async fn introspect(oauth: &OAuthServer, token: &str) -> Value {
    http()
        .post(oauth.introspection_endpoint())
        .form(&[("token", token)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// POSTs `form` to the token endpoint, with `authorization` if given.
async fn token_request(
    oauth: &OAuthServer,
    form: &[(&str, &str)],
    authorization: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = http().post(oauth.token_endpoint()).form(form);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.expect("the token endpoint answers");
    let status = response.status();
    (status, response.json().await.expect("a JSON body"))
}

/// A client-credentials access token of the `client_secret_basic` client for `resource`.
async fn basic_token(oauth: &OAuthServer, resource: &str, scope: &str) -> String {
    let form = [
        ("grant_type", "client_credentials"),
        ("resource", resource),
        ("scope", scope),
    ];
    let auth = basic_auth(BASIC_ID, BASIC_SECRET);
    let (status, body) = token_request(oauth, &form, Some(&auth)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["access_token"].as_str().unwrap().to_owned()
}

fn initialize_request() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "oauth-fixtures", "version": "0"},
        },
    })
}

/// POSTs a JSON-RPC message to the MCP endpoint as a streamable HTTP client would.
async fn mcp_post(
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    message: &Value,
) -> (StatusCode, HeaderMap, String) {
    let mut request = http()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(message);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let response = request.send().await.expect("the MCP server answers");
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, response.text().await.unwrap_or_default())
}

/// The status of an `initialize` POST with `token`.
async fn initialize_status(url: &str, token: Option<&str>) -> StatusCode {
    mcp_post(url, token, None, &initialize_request()).await.0
}

fn www_authenticate(headers: &HeaderMap) -> String {
    headers
        .get("www-authenticate")
        .expect("a WWW-Authenticate header")
        .to_str()
        .unwrap()
        .to_owned()
}

/// An MCP session over streamable HTTP with `token` as bearer (rmcp's client).
async fn connect(url: &str, token: &str) -> RunningService<RoleClient, ()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let transport = StreamableHttpClientTransport::from_config(config);
    tokio::time::timeout(WAIT, ().serve(transport))
        .await
        .expect("initialized in time")
        .expect("initialized")
}

/// Calls `tool` and returns the text of its result.
async fn call(client: &RunningService<RoleClient, ()>, tool: &str, arguments: Value) -> String {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Value::Object(arguments) = arguments {
        params = params.with_arguments(arguments);
    }
    let result = client.call_tool(params).await.expect("tools/call");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result.content[0].as_text().expect("text").text.clone()
}

/// `whoami` as JSON.
async fn whoami(url: &str, token: &str) -> Value {
    let client = connect(url, token).await;
    let text = call(&client, "whoami", json!({})).await;
    assert!(!text.contains(token), "whoami must not show the token");
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn metadata_protected_resource_metadata_and_challenge() {
    let (oauth, server, _) = setup(&["mcp"]).await;
    let http = http();

    let metadata: Value = http
        .get(oauth.metadata_url())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let issuer = &oauth.issuer;
    assert!(issuer.starts_with("http://127.0.0.1:") && !issuer.ends_with('/'));
    assert_eq!(metadata["issuer"], json!(issuer));
    assert_eq!(
        metadata["authorization_endpoint"],
        json!(format!("{issuer}/authorize"))
    );
    assert_eq!(metadata["token_endpoint"], json!(format!("{issuer}/token")));
    assert_eq!(
        metadata["registration_endpoint"],
        json!(format!("{issuer}/register"))
    );
    assert_eq!(
        metadata["introspection_endpoint"],
        json!(format!("{issuer}/introspect"))
    );
    assert_eq!(metadata["response_types_supported"], json!(["code"]));
    assert_eq!(
        metadata["grant_types_supported"],
        json!(["authorization_code", "refresh_token", "client_credentials"])
    );
    assert_eq!(
        metadata["code_challenge_methods_supported"],
        json!(["S256"])
    );
    assert_eq!(
        metadata["token_endpoint_auth_methods_supported"],
        json!([
            "client_secret_basic",
            "client_secret_post",
            "private_key_jwt",
            "none"
        ])
    );
    assert_eq!(
        metadata["token_endpoint_auth_signing_alg_values_supported"],
        json!(["RS256", "ES256"])
    );
    assert_eq!(metadata["scopes_supported"], json!(["mcp", "admin"]));

    // RFC 9728, served by the SDK.
    let prm: Value = http
        .get(server.metadata_url())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        prm,
        json!({
            "resource": server.url,
            // pydantic's URL type adds a slash to a URL without a path.
            "authorization_servers": [format!("{issuer}/")],
            "scopes_supported": ["mcp"],
            "bearer_methods_supported": ["header"],
        })
    );

    // The SDK's challenge, without a token and with one the authorization server never issued.
    let expected = format!(
        "Bearer error=\"invalid_token\", error_description=\"Authentication required\", \
         resource_metadata=\"{}\"",
        server.metadata_url()
    );
    for token in [None, Some("never-issued")] {
        let (status, headers, body) =
            mcp_post(&server.url, token, None, &initialize_request()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(www_authenticate(&headers), expected);
    }
    assert_eq!(
        oauth.introspections(),
        1,
        "the unknown token was introspected"
    );
}

#[tokio::test]
async fn client_credentials_with_each_client_authentication_method() {
    let (oauth, server, keys) = setup(&["mcp"]).await;
    let url = server.url.as_str();
    let issuer = oauth.issuer.clone();
    let cc = [("grant_type", "client_credentials"), ("resource", url)];

    // client_secret_basic, the secret form-urlencoded before base64.
    let basic = basic_auth(BASIC_ID, BASIC_SECRET);
    let form = [cc[0], cc[1], ("scope", "mcp")];
    let (status, body) = token_request(&oauth, &form, Some(&basic)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 3600);
    assert_eq!(body["scope"], "mcp");
    assert!(body.get("refresh_token").is_none(), "{body}");
    let basic_token = body["access_token"].as_str().unwrap().to_owned();

    // client_secret_post, no scope asked: the default one.
    let form = [
        cc[0],
        cc[1],
        ("client_id", POST_ID),
        ("client_secret", POST_SECRET),
    ];
    let (status, body) = token_request(&oauth, &form, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["scope"], "mcp");
    let post_token = body["access_token"].as_str().unwrap().to_owned();

    // private_key_jwt: ES256 for the issuer (as the client_id's iss), RS256 for the token
    // endpoint with client_id posted.
    let assertion = keys.es.assertion(ES_ID, &issuer);
    let form = [
        cc[0],
        cc[1],
        ("client_assertion_type", JWT_BEARER),
        ("client_assertion", &assertion),
    ];
    let (status, body) = token_request(&oauth, &form, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let es_token = body["access_token"].as_str().unwrap().to_owned();
    let assertion = keys.rs.assertion(RS_ID, &oauth.token_endpoint());
    let form = [
        cc[0],
        cc[1],
        ("client_id", RS_ID),
        ("scope", "mcp admin"),
        ("client_assertion_type", JWT_BEARER),
        ("client_assertion", &assertion),
    ];
    let (status, body) = token_request(&oauth, &form, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let rs_token = body["access_token"].as_str().unwrap().to_owned();

    // Each token works at the MCP server, as its own client.
    for (token, client_id, scopes) in [
        (&basic_token, BASIC_ID, json!(["mcp"])),
        (&post_token, POST_ID, json!(["mcp"])),
        (&es_token, ES_ID, json!(["mcp"])),
        (&rs_token, RS_ID, json!(["mcp", "admin"])),
    ] {
        let client = connect(url, token).await;
        assert_eq!(
            call(&client, "echo", json!({"text": "héllo"})).await,
            "héllo"
        );
        let me: Value = serde_json::from_str(&call(&client, "whoami", json!({})).await).unwrap();
        assert_eq!(
            me,
            json!({"client_id": client_id, "scopes": scopes, "subject": client_id, "resource": url})
        );
        client.cancel().await.unwrap();
    }
    let methods: Vec<_> = oauth
        .token_requests()
        .iter()
        .map(|r| {
            assert_eq!(r.grant_type.as_deref(), Some("client_credentials"));
            assert_eq!(r.resource.as_deref(), Some(url));
            assert_eq!(r.error, None);
            (
                r.auth_method.clone().unwrap(),
                r.client_id.clone().unwrap(),
                r.scope.clone(),
            )
        })
        .collect();
    assert_eq!(
        methods,
        [
            (
                "client_secret_basic".into(),
                BASIC_ID.into(),
                Some("mcp".into())
            ),
            ("client_secret_post".into(), POST_ID.into(), None),
            ("private_key_jwt".into(), ES_ID.into(), None),
            (
                "private_key_jwt".into(),
                RS_ID.into(),
                Some("mcp admin".into())
            ),
        ]
    );
    assert_eq!(oauth.issued_tokens(), 4);

    // Refusals.
    let refused = |status: StatusCode, body: &Value, error: &str| {
        assert_eq!(body["error"], error, "{body}");
        assert!(body["error_description"].is_string(), "{body}");
        assert_eq!(
            status,
            if error == "invalid_client" {
                StatusCode::UNAUTHORIZED
            } else {
                StatusCode::BAD_REQUEST
            }
        );
    };
    use base64::Engine as _;
    let unencoded = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{BASIC_ID}:{BASIC_SECRET}"))
    );
    let (status, body) = token_request(&oauth, &cc, Some(&unencoded)).await;
    refused(status, &body, "invalid_client");
    let (status, body) = token_request(&oauth, &cc, Some(&basic_auth(BASIC_ID, "wrong"))).await;
    refused(status, &body, "invalid_client");
    let no_resource = [cc[0]];
    let (status, body) = token_request(&oauth, &no_resource, Some(&basic)).await;
    refused(status, &body, "invalid_target");
    let other_resource = [cc[0], ("resource", "http://127.0.0.1:1/mcp")];
    let (status, body) = token_request(&oauth, &other_resource, Some(&basic)).await;
    refused(status, &body, "invalid_target");
    let two_resources = [cc[0], cc[1], cc[1]];
    let (status, body) = token_request(&oauth, &two_resources, Some(&basic)).await;
    refused(status, &body, "invalid_target");
    let unknown_scope = [cc[0], cc[1], ("scope", "mcp root")];
    let (status, body) = token_request(&oauth, &unknown_scope, Some(&basic)).await;
    refused(status, &body, "invalid_scope");
    let grant = [("grant_type", "password"), cc[1]];
    let (status, body) = token_request(&oauth, &grant, Some(&basic)).await;
    refused(status, &body, "unsupported_grant_type");
    let both = [
        cc[0],
        cc[1],
        ("client_id", BASIC_ID),
        ("client_secret", BASIC_SECRET),
    ];
    let (status, body) = token_request(&oauth, &both, Some(&basic)).await;
    refused(status, &body, "invalid_request");
    // Assertions: replayed, for another audience, signed by another key, expired.
    let jwt = |assertion: &str| {
        [
            cc[0],
            cc[1],
            ("client_assertion_type", JWT_BEARER),
            ("client_assertion", assertion),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
    };
    let replayed = keys.es.assertion(ES_ID, &issuer);
    let form = jwt(&replayed);
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(token_request(&oauth, &form, None).await.0, StatusCode::OK);
    let (status, body) = token_request(&oauth, &form, None).await;
    refused(status, &body, "invalid_client");
    let now = common::issuer::now();
    for assertion in [
        keys.es.assertion(ES_ID, "http://127.0.0.1:1"),
        keys.rs.assertion(ES_ID, &issuer),
        keys.es
            .sign(&json!({"iss": ES_ID, "sub": ES_ID, "aud": issuer, "exp": now - 60})),
        keys.es
            .sign(&json!({"iss": ES_ID, "sub": "someone", "aud": issuer, "exp": now + 60})),
    ] {
        let form = jwt(&assertion);
        let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let (status, body) = token_request(&oauth, &form, None).await;
        refused(status, &body, "invalid_client");
    }
    assert_eq!(oauth.issued_tokens(), 5);
    let errors: Vec<_> = oauth.token_requests()[4..]
        .iter()
        .map(|r| r.error.clone())
        .collect();
    assert_eq!(
        errors.iter().filter(|e| e.is_none()).count(),
        1,
        "{errors:?}"
    );
}

#[tokio::test]
async fn expired_and_revoked_tokens_get_401() {
    let (oauth, server, _) = setup(&[]).await;
    let url = server.url.as_str();

    oauth.set_token_lifetime(Duration::from_secs(1));
    let issued = Instant::now();
    let short = basic_token(&oauth, url, "mcp").await;
    assert_eq!(initialize_status(url, Some(&short)).await, StatusCode::OK);
    // The token's lifetime has to pass: nothing to wait on but the clock.
    tokio::time::sleep(
        (issued + Duration::from_millis(1100)).saturating_duration_since(Instant::now()),
    )
    .await;
    let (status, headers, _) = mcp_post(url, Some(&short), None, &initialize_request()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(www_authenticate(&headers).contains("error=\"invalid_token\""));

    oauth.set_token_lifetime(Duration::from_secs(60));
    let token = basic_token(&oauth, url, "mcp").await;
    let client = connect(url, &token).await;
    assert_eq!(
        call(&client, "echo", json!({"text": "before"})).await,
        "before"
    );
    oauth.revoke_all();
    assert_eq!(
        initialize_status(url, Some(&token)).await,
        StatusCode::UNAUTHORIZED
    );
    // The session made with it is refused too.
    let call_after = client.call_tool(
        CallToolRequestParams::new("echo")
            .with_arguments(json!({"text": "after"}).as_object().unwrap().clone()),
    );
    let refused = tokio::time::timeout(WAIT, call_after)
        .await
        .expect("an answer in time");
    assert!(refused.is_err(), "{refused:?}");
    // A new token works.
    let fresh = basic_token(&oauth, url, "mcp").await;
    assert_eq!(initialize_status(url, Some(&fresh)).await, StatusCode::OK);
}

/// A loopback "browser landing page": the query of each request to `/callback`.
async fn callback_listener() -> (
    u16,
    tokio::sync::mpsc::UnboundedReceiver<Vec<(String, String)>>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let router = axum::Router::new().route(
        "/callback",
        axum::routing::get(
            move |axum::extract::RawQuery(query): axum::extract::RawQuery| {
                let pairs = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                    .into_owned()
                    .collect();
                let _ = tx.send(pairs);
                async { "you may close this window" }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, router).await });
    (port, rx)
}

/// Follows `/authorize` (redirects followed, as a browser) to the callback listener; returns the
/// parameters it got.
async fn authorize_via_browser(
    oauth: &OAuthServer,
    query: &[(&str, &str)],
    landed: &mut tokio::sync::mpsc::UnboundedReceiver<Vec<(String, String)>>,
) -> std::collections::HashMap<String, String> {
    let browser = reqwest::Client::builder().timeout(WAIT).build().unwrap();
    let page = browser
        .get(url::Url::parse_with_params(&oauth.authorization_endpoint(), query).unwrap())
        .send()
        .await
        .expect("authorize");
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.text().await.unwrap(), "you may close this window");
    let pairs = tokio::time::timeout(WAIT, landed.recv())
        .await
        .unwrap()
        .unwrap();
    pairs.into_iter().collect()
}

#[tokio::test]
async fn authorization_code_with_pkce_and_refresh_token_rotation() {
    let (oauth, server, _) = setup(&["mcp"]).await;
    let url = server.url.as_str();
    let (port, mut landed) = callback_listener().await;

    // Dynamic registration of a public client, its redirect URI without a port (RFC 8252).
    let registration = json!({
        "client_name": "oauth fixtures",
        "redirect_uris": ["http://127.0.0.1/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
    });
    let response = http()
        .post(oauth.registration_endpoint())
        .json(&registration)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let registered: Value = response.json().await.unwrap();
    let client_id = registered["client_id"].as_str().unwrap().to_owned();
    assert!(registered.get("client_secret").is_none(), "{registered}");
    assert_eq!(registered["token_endpoint_auth_method"], "none");
    assert_eq!(oauth.registrations(), std::slice::from_ref(&registered));

    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let authorize = |challenge: String, state: &'static str| {
        vec![
            ("response_type", "code".to_owned()),
            ("client_id", client_id.clone()),
            ("redirect_uri", redirect_uri.clone()),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256".to_owned()),
            ("state", state.to_owned()),
            ("scope", "mcp".to_owned()),
            ("resource", url.to_owned()),
        ]
    };
    let exchange = |code: String, verifier: String| {
        vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code),
            ("redirect_uri", redirect_uri.clone()),
            ("code_verifier", verifier),
            ("client_id", client_id.clone()),
            ("resource", url.to_owned()),
        ]
    };
    async fn post(oauth: &OAuthServer, form: Vec<(&'static str, String)>) -> (StatusCode, Value) {
        let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        token_request(oauth, &form, None).await
    }
    async fn browse(
        oauth: &OAuthServer,
        query: Vec<(&'static str, String)>,
        landed: &mut tokio::sync::mpsc::UnboundedReceiver<Vec<(String, String)>>,
    ) -> std::collections::HashMap<String, String> {
        let query: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
        authorize_via_browser(oauth, &query, landed).await
    }

    // A code presented with the wrong verifier is refused, and spent.
    let (verifier, challenge) = pkce();
    let back = browse(&oauth, authorize(challenge, "first"), &mut landed).await;
    assert_eq!(back["state"], "first");
    let code = back["code"].clone();
    let (wrong, _) = pkce();
    let (status, body) = post(&oauth, exchange(code.clone(), wrong)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    let (status, body) = post(&oauth, exchange(code, verifier)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );

    // The whole flow.
    let (verifier, challenge) = pkce();
    let back = browse(&oauth, authorize(challenge, "second"), &mut landed).await;
    assert_eq!(back["state"], "second");
    assert_eq!(back["iss"], oauth.issuer);
    let (status, tokens) = post(&oauth, exchange(back["code"].clone(), verifier)).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert_eq!(tokens["scope"], "mcp");
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(
        whoami(url, &access).await,
        json!({"client_id": client_id, "scopes": ["mcp"], "subject": USER, "resource": url})
    );

    // Refresh: a new pair; the old refresh token is spent.
    let refresh_form = |token: &str| {
        vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", token.to_owned()),
            ("client_id", client_id.clone()),
            ("resource", url.to_owned()),
        ]
    };
    let (status, renewed) = post(&oauth, refresh_form(&refresh)).await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    let access2 = renewed["access_token"].as_str().unwrap().to_owned();
    let refresh2 = renewed["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(access2, access);
    assert_ne!(refresh2, refresh);
    let (status, body) = post(&oauth, refresh_form(&refresh)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    let client = connect(url, &access2).await;
    assert_eq!(
        call(&client, "echo", json!({"text": "refreshed"})).await,
        "refreshed"
    );
    let (status, body) = post(&oauth, refresh_form(&refresh2)).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let grants: Vec<_> = oauth
        .token_requests()
        .iter()
        .map(|r| {
            assert_eq!(r.auth_method.as_deref(), Some("none"));
            assert_eq!(r.resource.as_deref(), Some(url));
            (r.grant_type.clone().unwrap(), r.error.clone())
        })
        .collect();
    let ok = |g: &str| (g.to_owned(), None);
    let bad = |g: &str| (g.to_owned(), Some("invalid_grant".to_owned()));
    assert_eq!(
        grants,
        [
            bad("authorization_code"),
            bad("authorization_code"),
            ok("authorization_code"),
            ok("refresh_token"),
            bad("refresh_token"),
            ok("refresh_token"),
        ]
    );
    let asked: Vec<_> = oauth
        .authorize_requests()
        .iter()
        .map(|r| (r.scope.clone(), r.resource.clone(), r.error.clone()))
        .collect();
    let expected = (Some("mcp".to_owned()), Some(url.to_owned()), None);
    assert_eq!(asked, [expected.clone(), expected]);
}

#[tokio::test]
async fn authorize_refusals() {
    let oauth = OAuthServer::with_clients(
        vec![Client::public("app").redirect_uri("http://127.0.0.1/callback")],
        &["http://127.0.0.1:1/mcp"],
    )
    .await;
    let (_, challenge) = pkce();
    let base = [
        ("response_type", "code"),
        ("client_id", "app"),
        ("redirect_uri", "http://127.0.0.1:4444/callback"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", "xyz"),
        ("resource", "http://127.0.0.1:1/mcp"),
    ];
    let get = |changes: &[(&'static str, Option<&'static str>)]| {
        let mut query: Vec<(&str, &str)> = base.to_vec();
        for (name, value) in changes {
            query.retain(|(k, _)| k != name);
            if let Some(value) = value {
                query.push((name, value));
            }
        }
        let target = url::Url::parse_with_params(&oauth.authorization_endpoint(), &query).unwrap();
        let request = http().get(target);
        async move { request.send().await.unwrap() }
    };
    let location = |response: &reqwest::Response| -> url::Url {
        assert_eq!(response.status(), StatusCode::FOUND);
        url::Url::parse(response.headers()["location"].to_str().unwrap()).unwrap()
    };
    let param = |location: &url::Url, name: &str| {
        location
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };

    let approved = location(&get(&[]).await);
    assert_eq!(approved.port(), Some(4444), "any loopback port");
    assert!(param(&approved, "code").is_some());
    assert_eq!(param(&approved, "state").as_deref(), Some("xyz"));

    for (changes, error) in [
        (
            vec![("code_challenge_method", Some("plain"))],
            "invalid_request",
        ),
        (vec![("code_challenge", None)], "invalid_request"),
        (vec![("state", None)], "invalid_request"),
        (
            vec![("response_type", Some("token"))],
            "unsupported_response_type",
        ),
        (vec![("resource", None)], "invalid_target"),
        (
            vec![("resource", Some("http://127.0.0.1:2/mcp"))],
            "invalid_target",
        ),
    ] {
        let refused = location(&get(&changes).await);
        assert_eq!(
            param(&refused, "error").as_deref(),
            Some(error),
            "{changes:?}"
        );
        assert!(param(&refused, "code").is_none());
    }
    // Not redirected at all: an unknown client, a redirect URI not registered.
    for changes in [
        vec![("client_id", Some("nobody"))],
        vec![("redirect_uri", Some("http://127.0.0.1:4444/elsewhere"))],
        vec![("redirect_uri", Some("https://evil.test/callback"))],
    ] {
        let response = get(&changes).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{changes:?}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], "invalid_request");
    }
    let errors = oauth
        .authorize_requests()
        .iter()
        .filter(|r| r.error.is_some())
        .count();
    assert_eq!(errors, 9);
}

#[tokio::test]
async fn dynamic_registration_of_confidential_clients() {
    let resource = "http://127.0.0.1:1/mcp";
    let oauth = OAuthServer::with_clients(Vec::new(), &[resource]).await;
    let register = |metadata: Value| {
        let request = http().post(oauth.registration_endpoint()).json(&metadata);
        async move {
            let response = request.send().await.unwrap();
            (response.status(), response.json::<Value>().await.unwrap())
        }
    };
    let cc = [("grant_type", "client_credentials"), ("resource", resource)];

    let (status, post_client) = register(json!({
        "grant_types": ["client_credentials"],
        "token_endpoint_auth_method": "client_secret_post",
    }))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{post_client}");
    let (id, secret) = (
        post_client["client_id"].as_str().unwrap(),
        post_client["client_secret"].as_str().unwrap(),
    );
    let form = [cc[0], cc[1], ("client_id", id), ("client_secret", secret)];
    assert_eq!(token_request(&oauth, &form, None).await.0, StatusCode::OK);
    // It registered client_secret_post: Basic is refused.
    let (status, body) = token_request(&oauth, &cc, Some(&basic_auth(id, secret))).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("invalid_client"))
    );

    // private_key_jwt with its key as a JWK.
    let key = ClientKey::es256();
    let (status, jwt_client) = register(json!({
        "grant_types": ["client_credentials"],
        "token_endpoint_auth_method": "private_key_jwt",
        "jwks": {"keys": [key.public_jwk()]},
    }))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{jwt_client}");
    assert!(jwt_client.get("client_secret").is_none());
    let assertion = key.assertion(
        jwt_client["client_id"].as_str().unwrap(),
        &format!("{}/", oauth.issuer),
    );
    let form = [
        cc[0],
        cc[1],
        ("client_assertion_type", JWT_BEARER),
        ("client_assertion", &assertion),
    ];
    let (status, body) = token_request(&oauth, &form, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Refused registrations.
    for (metadata, error) in [
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (
            json!({"redirect_uris": ["http://example.test/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"token_endpoint_auth_method": "tls_client_auth", "redirect_uris": ["http://127.0.0.1/cb"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"token_endpoint_auth_method": "private_key_jwt", "grant_types": ["client_credentials"]}),
            "invalid_client_metadata",
        ),
    ] {
        let (status, body) = register(metadata.clone()).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::BAD_REQUEST, Some(error)),
            "{metadata}"
        );
    }
    assert_eq!(oauth.registrations().len(), 2);
}

#[tokio::test]
async fn step_up_and_required_scopes() {
    let (oauth, server, _) = setup(&["mcp"]).await;
    let url = server.url.as_str();

    // Without the server's required scope: the SDK's 403.
    let admin_only = basic_token(&oauth, url, "admin").await;
    let (status, headers, _) = mcp_post(url, Some(&admin_only), None, &initialize_request()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let challenge = www_authenticate(&headers);
    assert!(
        challenge.starts_with("Bearer error=\"insufficient_scope\""),
        "{challenge}"
    );

    // With it, but not `admin`: a session, whose call of admin_action is refused with a scope
    // challenge.
    let token = basic_token(&oauth, url, "mcp").await;
    let (status, headers, _) = mcp_post(url, Some(&token), None, &initialize_request()).await;
    assert_eq!(status, StatusCode::OK);
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = mcp_post(url, Some(&token), Some(&session), &initialized).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let admin_call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "admin_action", "arguments": {}},
    });
    let (status, headers, body) = mcp_post(url, Some(&token), Some(&session), &admin_call).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        www_authenticate(&headers),
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"admin\", resource_metadata=\"{}\", \
             error_description=\"Required scope: admin\"",
            server.metadata_url()
        )
    );
    // Other tools of the same session still work.
    let echo = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "still here"}},
    });
    let (status, _, body) = mcp_post(url, Some(&token), Some(&session), &echo).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("still here"), "{body}");

    // With `admin` as well.
    let stepped_up = basic_token(&oauth, url, "mcp admin").await;
    let client = connect(url, &stepped_up).await;
    assert_eq!(
        call(&client, "admin_action", json!({})).await,
        "admin action done"
    );
}

#[tokio::test]
async fn tokens_are_bound_to_their_resource() {
    let (oauth, one, _) = setup(&[]).await;
    let other = OAuthMcpServer::protected_by(&oauth, &[]).await;
    let for_other = basic_token(&oauth, &other.url, "mcp").await;
    assert_eq!(
        initialize_status(&other.url, Some(&for_other)).await,
        StatusCode::OK
    );
    assert_eq!(
        initialize_status(&one.url, Some(&for_other)).await,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn down_stopped_and_resumed() {
    let resource = "http://127.0.0.1:1/mcp";
    let oauth = OAuthServer::with_clients(vec![Client::confidential("c", "s")], &[resource]).await;
    let cc = [("grant_type", "client_credentials"), ("resource", resource)];
    let auth = basic_auth("c", "s");
    let (status, body) = token_request(&oauth, &cc, Some(&auth)).await;
    assert_eq!(status, StatusCode::OK);
    let token = body["access_token"].as_str().unwrap().to_owned();

    oauth.set_down(true);
    let (status, body) = token_request(&oauth, &cc, Some(&auth)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Some("temporarily_unavailable")
        )
    );
    oauth.set_down(false);
    assert_eq!(
        token_request(&oauth, &cc, Some(&auth)).await.0,
        StatusCode::OK
    );

    oauth.stop().await;
    let error = http()
        .post(oauth.token_endpoint())
        .form(&cc)
        .send()
        .await
        .unwrap_err();
    assert!(error.is_connect(), "{error:?}");
    oauth.resume().await;
    assert_eq!(
        token_request(&oauth, &cc, Some(&auth)).await.0,
        StatusCode::OK
    );
    let introspection: Value = introspect(&oauth, &token).await;
    assert_eq!(introspection["active"], true, "{introspection}");
    assert_eq!(introspection["client_id"], "c");
    assert_eq!(introspection["aud"], resource);

    oauth.revoke_all();
    let introspection: Value = introspect(&oauth, &token).await;
    assert_eq!(introspection, json!({"active": false}));
    let errors: Vec<_> = oauth
        .token_requests()
        .iter()
        .map(|r| r.error.clone())
        .collect();
    assert_eq!(
        errors,
        [None, Some("temporarily_unavailable".into()), None, None]
    );
    assert_eq!(oauth.issued_tokens(), 3);
}
