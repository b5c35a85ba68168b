//! Upstream OAuth end to end: the broker as the OAuth client of an MCP server written with the
//! Python `mcp` SDK, whose tokens come from the tests' own authorization server. Client
//! credentials (a secret, a private key), tokens renewed before they expire and once after a
//! 401, step-up on `insufficient_scope`, a token endpoint that is down (the server FAILED with
//! the reason, retried with backoff), `toolbroker login` with its token store, and no secret in
//! the logs.

use std::{
    os::unix::fs::PermissionsExt as _,
    time::{Duration, Instant},
};

use crate::common::{
    self, Broker,
    oauth_server::{Client, ClientKey, OAuthServer, Options},
    python::OAuthMcpServer,
    url_server,
};
use serde_json::{Value, json};
use toolbroker::proto::ServerState;

const SECRET: &str = "s3cr+t/with%odd=chars";

/// An authorization server for one confidential client `broker`, whose access tokens live
/// `lifetime`, and a protected MCP server that needs scope `mcp`.
async fn protected(lifetime: Duration) -> (OAuthServer, OAuthMcpServer) {
    let oauth = OAuthServer::start(Options {
        clients: vec![Client::confidential("broker", SECRET)],
        scopes_supported: vec!["mcp".into(), "admin".into()],
        token_lifetime: lifetime,
        ..Options::default()
    })
    .await;
    let server = OAuthMcpServer::protected_by(&oauth, &["mcp"]).await;
    (oauth, server)
}

/// The server `remote` at `url`, under `oauth`.
fn remote(url: &str, oauth: Value) -> common::Server {
    url_server("remote", url)
        .prefix("remote_")
        .set("oauth", oauth)
        .set("backoff_initial", "200ms")
        .set("backoff_max", "1s")
}

async fn broker_for(server: common::Server) -> Broker {
    let broker = Broker::builder()
        .server(server)
        .env("REMOTE_SECRET", SECRET)
        .start()
        .await;
    broker.wait_ready().await;
    broker
}

/// What the server's `whoami` says of the token it got.
async fn whoami(broker: &Broker) -> Value {
    serde_json::from_str(&broker.text("remote_whoami", "{}").await).unwrap()
}

fn client_credentials() -> Value {
    json!({"client_id": "broker", "client_secret_env": "REMOTE_SECRET", "scopes": ["mcp"]})
}

#[tokio::test]
async fn client_credentials_are_cached_renewed_before_expiry_and_never_logged() {
    let (oauth, mcp) = protected(Duration::from_secs(8)).await;
    // The first token is issued after this.
    let started = Instant::now();
    let broker = broker_for(remote(&mcp.url, client_credentials())).await;

    let seen = whoami(&broker).await;
    assert_eq!(seen["client_id"], "broker", "{seen}");
    assert_eq!(seen["resource"], mcp.url.as_str(), "{seen}");
    let requests = oauth.token_requests();
    assert_eq!(
        requests.len(),
        1,
        "one token for the listing and the call: {requests:?}"
    );
    let first = &requests[0];
    assert_eq!(first.grant_type.as_deref(), Some("client_credentials"));
    assert_eq!(first.resource.as_deref(), Some(mcp.url.as_str()));
    assert_eq!(first.scope.as_deref(), Some("mcp"));

    // Renewed 30 s or half its lifetime before expiry: calls go on with the cached token, and
    // the first one past 4 s of its 8 gets a new one.
    let renewed_at = common::poll("a renewed token", Duration::from_millis(200), || async {
        assert_eq!(whoami(&broker).await["client_id"], "broker");
        (oauth.token_requests().len() > 1).then(|| started.elapsed())
    })
    .await;
    // The token was issued after `started`, so it expires after `started` + 8 s.
    assert!(
        (Duration::from_secs(4)..Duration::from_secs(8)).contains(&renewed_at),
        "renewed {renewed_at:?} after the start: past half its lifetime, before expiry"
    );
    assert_eq!(oauth.token_requests().len(), 2, "renewed once");
    assert_eq!(whoami(&broker).await["client_id"], "broker");
    assert_eq!(oauth.token_requests().len(), 2, "the new one is cached");

    let logs = broker.dump();
    assert!(!logs.contains(SECRET), "the client secret reached the log");
    assert!(!logs.contains("Bearer "), "a token reached the log");
}

#[tokio::test]
async fn an_overflowing_expires_in_is_clamped_and_the_server_keeps_working() {
    // 2^64−1 seconds: added to the clock as it was, it panicked the server's supervision task.
    let oauth = OAuthServer::start(Options {
        clients: vec![Client::confidential("broker", SECRET)],
        scopes_supported: vec!["mcp".into()],
        advertised_expires_in: Some(u64::MAX),
        ..Options::default()
    })
    .await;
    let mcp = OAuthMcpServer::protected_by(&oauth, &["mcp"]).await;
    let broker = broker_for(remote(&mcp.url, client_credentials())).await;
    for _ in 0..2 {
        assert_eq!(whoami(&broker).await["client_id"], "broker");
    }
    assert_eq!(
        oauth.token_requests().len(),
        1,
        "the token is kept (a day at most), not asked for again"
    );
    let logs = broker.dump();
    assert!(!logs.contains("panicked"), "a task panicked:\n{logs}");
}

#[tokio::test]
async fn a_refused_token_is_renewed_once_and_a_down_token_endpoint_fails_the_server_with_the_reason()
 {
    let (oauth, mcp) = protected(Duration::from_secs(3600)).await;
    let broker = broker_for(remote(&mcp.url, client_credentials())).await;
    whoami(&broker).await;
    assert_eq!(oauth.token_requests().len(), 1);

    // Every token ends early (revoked): the next request is refused (401), and sent again once
    // with a new token.
    oauth.revoke_all();
    assert_eq!(whoami(&broker).await["client_id"], "broker");
    assert_eq!(
        oauth.token_requests().len(),
        2,
        "one new token after the 401"
    );

    // Refused again, and no new token to be had: the call says which step failed, and so
    // does the server's state, retried with backoff.
    oauth.set_down(true);
    oauth.revoke_all();
    let refused = broker.call("remote_whoami", "{}").await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("client credentials grant failed")
            && refused.message().contains("temporarily_unavailable"),
        "{}",
        refused.message()
    );
    let failed = broker
        .wait_for_status("remote", "failed for want of a token", |status| {
            status.state() == ServerState::Failed
                && status.message.contains("client credentials grant failed")
        })
        .await;
    assert!(
        failed.message.contains("temporarily_unavailable")
            && failed.message.contains("next attempt in"),
        "{}",
        failed.message
    );
    // The broker tries again (backoff 200ms..1s): nothing tells the test when, so it polls.
    let attempts = oauth.token_requests().len();
    common::poll(
        "the broker tries again",
        Duration::from_millis(50),
        || async { (oauth.token_requests().len() > attempts).then_some(()) },
    )
    .await;

    oauth.set_down(false);
    broker.wait_for_state("remote", ServerState::Ready).await;
    assert_eq!(whoami(&broker).await["client_id"], "broker");
    let logs = broker.dump();
    assert!(!logs.contains(SECRET), "the client secret reached the log");
}

#[tokio::test]
async fn insufficient_scope_steps_up_with_the_scope_the_server_names() {
    let (oauth, mcp) = protected(Duration::from_secs(3600)).await;
    let broker = broker_for(remote(&mcp.url, client_credentials())).await;
    let answer = broker.text("remote_admin_action", "{}").await;
    assert!(answer.contains("admin"), "{answer}");
    let scopes: Vec<_> = oauth
        .token_requests()
        .into_iter()
        .map(|request| request.scope.unwrap_or_default())
        .collect();
    assert_eq!(scopes, ["mcp", "mcp admin"], "stepped up once");
}

#[tokio::test]
async fn private_key_jwt_signs_with_the_key_file_and_a_bad_key_is_a_config_error() {
    let key = ClientKey::es256();
    let oauth = OAuthServer::start(Options {
        clients: vec![Client::private_key_jwt("machine", &key.public_pem)],
        ..Options::default()
    })
    .await;
    let mcp = OAuthMcpServer::protected_by(&oauth, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("client.pem");
    std::fs::write(&key_file, &key.private_pem).unwrap();
    let oauth_section =
        json!({"client_id": "machine", "private_key_file": key_file.display().to_string()});
    let broker = broker_for(remote(&mcp.url, oauth_section.clone())).await;
    assert_eq!(whoami(&broker).await["client_id"], "machine");
    let requests = oauth.token_requests();
    assert_eq!(requests[0].auth_method.as_deref(), Some("private_key_jwt"));

    // A key that cannot sign: `check` says so at the field, exit 2.
    std::fs::write(&key_file, "-----BEGIN PRIVATE KEY-----\nnot a key\n").unwrap();
    let config = dir.path().join("config.yaml");
    let text = common::Config::new()
        .server(remote(&mcp.url, oauth_section))
        .text();
    std::fs::write(&config, text).unwrap();
    let output = common::run_with_config(&["check", "--config"], &config);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("servers[0] (remote).oauth.private_key_file")
            && stderr.contains("client.pem"),
        "{stderr}"
    );
}

#[tokio::test]
async fn login_writes_a_private_token_store_the_broker_uses_refreshes_and_reloads_on_sighup() {
    let (oauth, mcp) = protected(Duration::from_secs(8)).await;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("tokens").join("remote.json");
    let section = json!({"token_store": store.display().to_string(), "scopes": ["mcp"]});
    let broker = Broker::builder()
        .server(remote(&mcp.url, section))
        .start()
        .await;
    broker.wait_ready().await;

    // Nobody logged in yet: the server's state says what to run.
    let status = broker.server("remote").await;
    assert_eq!(status.state(), ServerState::Failed, "{status:?}");
    assert!(
        status.message.contains("toolbroker login remote"),
        "{}",
        status.message
    );

    common::oauth_server::login(&broker.config_path(), &[]).await;
    let mode = std::fs::metadata(&store).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the token store is the owner's only");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&store).unwrap()).unwrap();
    let registered = oauth.registrations();
    assert_eq!(registered.len(), 1, "a client registered dynamically");
    assert_eq!(file["client_id"], registered[0]["client_id"]);
    let authorize = &oauth.authorize_requests()[0];
    assert_eq!(authorize.resource.as_deref(), Some(mcp.url.as_str()));
    assert_eq!(authorize.code_challenge_method.as_deref(), Some("S256"));
    let access = file["credentials"]["token_response"]["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let refresh = file["credentials"]["token_response"]["refresh_token"]
        .as_str()
        .unwrap()
        .to_owned();

    // SIGHUP: the broker reads the store and starts the server at once.
    let asked = Instant::now();
    broker.signal(nix::sys::signal::Signal::SIGHUP);
    broker.wait_for_state("remote", ServerState::Ready).await;
    assert!(asked.elapsed() < Duration::from_secs(10));
    let seen = whoami(&broker).await;
    assert_eq!(seen["client_id"], file["client_id"], "{seen}");

    // The access token nears expiry (rmcp refreshes when less than half its 8 s remain, counted
    // in whole seconds): calls go on, and one of them gets it refreshed with the refresh token,
    // written back.
    let grants = || -> Vec<String> {
        oauth
            .token_requests()
            .into_iter()
            .map(|request| request.grant_type.unwrap_or_default())
            .collect()
    };
    let refreshed_at = common::poll("a refreshed token", Duration::from_millis(500), || async {
        whoami(&broker).await;
        (grants().len() > 1).then(|| asked.elapsed())
    })
    .await;
    assert!(refreshed_at < Duration::from_secs(10), "{refreshed_at:?}");
    assert_eq!(grants(), ["authorization_code", "refresh_token"]);
    let refreshed: Value = serde_json::from_str(&std::fs::read_to_string(&store).unwrap()).unwrap();
    let rotated = refreshed["credentials"]["token_response"]["refresh_token"]
        .as_str()
        .unwrap();
    assert_ne!(rotated, refresh, "the rotated refresh token is stored");
    let mode = std::fs::metadata(&store).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "still the owner's only after the refresh"
    );

    let logs = broker.dump();
    for secret in [access.as_str(), refresh.as_str(), rotated] {
        assert!(!logs.contains(secret), "a token reached the log");
    }
}
