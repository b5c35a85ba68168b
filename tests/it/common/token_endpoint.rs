//! An RFC 8693 token endpoint of the test's own on 127.0.0.1: it checks the client's HTTP Basic
//! credentials and the request's form, trades a subject token `T` for `exchanged-T` (valid an
//! hour, or as long as the test says), refuses `token-mallory` as an `invalid_grant`, and counts the exchanges per subject.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Form, Json,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use base64::Engine as _;
use serde_json::{Value, json};

/// The client id the broker must authenticate with.
pub const CLIENT_ID: &str = "toolbroker";
/// Its secret.
pub const CLIENT_SECRET: &str = "exchange-secret";

/// A running token endpoint.
pub struct TokenEndpoint {
    /// Its URL.
    pub url: String,
    exchanges: Arc<Mutex<HashMap<String, usize>>>,
}

impl TokenEndpoint {
    /// Starts one on a free port.
    pub async fn start() -> Self {
        Self::answering_expires_in(json!(3600)).await
    }

    /// Starts one whose tokens' `expires_in` is `expires_in`, whatever it is.
    pub async fn answering_expires_in(expires_in: Value) -> Self {
        let exchanges: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let counted = exchanges.clone();
        let router = axum::Router::new().route(
            "/token",
            axum::routing::post(
                move |headers: HeaderMap, Form(form): Form<HashMap<String, String>>| {
                    let counted = counted.clone();
                    let expires_in = expires_in.clone();
                    async move { exchange(&headers, &form, &counted, expires_in) }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self { url, exchanges }
    }

    /// How many times `subject` was exchanged.
    pub fn exchanges(&self, subject: &str) -> usize {
        self.exchanges
            .lock()
            .unwrap()
            .get(subject)
            .copied()
            .unwrap_or(0)
    }
}

fn exchange(
    headers: &HeaderMap,
    form: &HashMap<String, String>,
    counted: &Mutex<HashMap<String, usize>>,
    expires_in: Value,
) -> Response {
    let basic =
        base64::engine::general_purpose::STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"));
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Basic {basic}"))
    {
        return refusal(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "bad client credentials",
        );
    }
    let field = |name: &str| form.get(name).map(String::as_str);
    if field("grant_type") != Some("urn:ietf:params:oauth:grant-type:token-exchange")
        || field("subject_token_type") != Some("urn:ietf:params:oauth:token-type:access_token")
        || field("audience") != Some("demo-mcp")
    {
        return refusal(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "not a token exchange for demo-mcp",
        );
    }
    let Some(subject) = field("subject_token") else {
        return refusal(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "no subject_token",
        );
    };
    *counted
        .lock()
        .unwrap()
        .entry(subject.to_owned())
        .or_default() += 1;
    if subject == "token-mallory" {
        return refusal(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "subject not allowed here",
        );
    }
    Json(json!({
        "access_token": format!("exchanged-{subject}"),
        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "token_type": "Bearer",
        "expires_in": expires_in,
    }))
    .into_response()
}

fn refusal(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}
