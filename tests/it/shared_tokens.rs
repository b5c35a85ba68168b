//! Upstream OAuth tokens kept in a shared Redis (`state.redis`): brokers with one config share
//! one client-credentials token (one token request per token lifetime for the whole fleet,
//! and one after a refusal), a login's tokens live in Redis (written there by `toolbroker
//! login`) and their refresh token, rotated at each refresh, is redeemed once for the fleet,
//! and a Redis that cannot be reached is survived by client credentials and fails a login.

use std::{process::Stdio, time::Duration};

use futures::future::join_all;
use redis::AsyncCommands as _;
use serde_json::{Value, json};

use crate::common::{
    self, Broker, STARTUP,
    oauth_server::{Client, OAuthServer, Options, TokenRequest},
    python::OAuthMcpServer,
    redis::RedisServer,
    toolbroker_bin, url_server,
};

const SECRET: &str = "s3cr+t/with%odd=chars";
/// Where the tokens of server `remote` are, under the default prefix.
const KEY: &str = "toolbroker:oauth:remote";

/// An authorization server for the confidential client `broker` (tokens living `lifetime`)
/// and an MCP server it protects, needing scope `mcp`.
async fn protected(lifetime: Duration) -> (OAuthServer, OAuthMcpServer) {
    let oauth = OAuthServer::start(Options {
        clients: vec![Client::confidential("broker", SECRET)],
        scopes_supported: vec!["mcp".into()],
        token_lifetime: lifetime,
        ..Options::default()
    })
    .await;
    let server = OAuthMcpServer::protected_by(&oauth, &["mcp"]).await;
    (oauth, server)
}

/// A config with server `remote` at `url` under `oauth`, its state in `redis`.
fn config(redis: &RedisServer, url: &str, oauth: Value) -> common::Config {
    let remote = url_server("remote", url)
        .prefix("remote_")
        .set("oauth", oauth)
        .set("backoff_initial", "200ms")
        .set("backoff_max", "1s");
    common::Config::new()
        .top("state", json!({"redis": redis.url()}))
        .server(remote)
}

/// `count` brokers started together with `config`, ready.
async fn fleet(config: &common::Config, count: usize) -> Vec<Broker> {
    join_all((0..count).map(|_| async {
        let broker = Broker::builder()
            .config(config.clone())
            .env("REMOTE_SECRET", SECRET)
            .start()
            .await;
        broker.wait_ready().await;
        broker
    }))
    .await
}

/// `whoami` on every broker at once; each must be served by the client `client`.
async fn whoami_all(brokers: &[Broker], client: &str) {
    let seen = join_all(brokers.iter().map(|b| b.text("remote_whoami", "{}"))).await;
    for seen in seen {
        let seen: Value = serde_json::from_str(&seen).unwrap();
        assert_eq!(seen["client_id"], client, "{seen}");
    }
}

fn grants(requests: &[TokenRequest]) -> Vec<String> {
    requests
        .iter()
        .map(|request| request.grant_type.clone().unwrap_or_default())
        .collect()
}

/// A connection for the test's own commands.
async fn connection(redis: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("redis answers")
}

/// What Redis holds for server `remote`.
async fn stored(redis: &RedisServer) -> Option<Value> {
    let text: Option<String> = connection(redis).await.get(KEY).await.unwrap();
    text.map(|text| serde_json::from_str(&text).unwrap())
}

fn client_credentials() -> Value {
    json!({"client_id": "broker", "client_secret_env": "REMOTE_SECRET", "scopes": ["mcp"]})
}

#[tokio::test]
async fn three_brokers_fetch_one_client_credentials_token_per_lifetime_and_per_refusal() {
    let redis = RedisServer::start().await;
    let (oauth, mcp) = protected(Duration::from_secs(3600)).await;
    let brokers = fleet(&config(&redis, &mcp.url, client_credentials()), 3).await;
    for _ in 0..3 {
        whoami_all(&brokers, "broker").await;
    }
    let requests = oauth.token_requests();
    assert_eq!(grants(&requests), ["client_credentials"], "{requests:?}");
    let held = stored(&redis).await.expect("the token is in Redis");
    assert!(held["expires_at_ms"].as_u64().is_some(), "{held}");
    let ttl: i64 = connection(&redis).await.pttl(KEY).await.unwrap();
    assert!(
        (3_500_000..=3_600_000).contains(&ttl),
        "kept as long as it lives: {ttl} ms"
    );

    // Every token refused at once (revoked): all three get a 401 and renew, with one new token
    // between them. The new ones live 6 s.
    oauth.set_token_lifetime(Duration::from_secs(6));
    oauth.revoke_all();
    whoami_all(&brokers, "broker").await;
    assert_eq!(
        grants(&oauth.token_requests()),
        ["client_credentials"; 2],
        "one new token for the fleet after the refusal"
    );
    let renewed_from = tokio::time::Instant::now();

    // Renewed halfway through its 6 s, by one broker for all: calls from the three go on
    // until it is, then once more from each with the new token.
    common::poll("a renewed token", Duration::from_millis(100), || async {
        whoami_all(&brokers, "broker").await;
        (oauth.token_requests().len() > 2).then_some(())
    })
    .await;
    assert!(
        renewed_from.elapsed() >= Duration::from_millis(2_900),
        "renewed before half its lifetime: {:?}",
        renewed_from.elapsed()
    );
    whoami_all(&brokers, "broker").await;
    let requests = oauth.token_requests();
    assert_eq!(
        grants(&requests),
        ["client_credentials"; 3],
        "one per lifetime for the fleet: {requests:?}"
    );
    assert!(requests.iter().all(|r| r.error.is_none()), "{requests:?}");
    for broker in &brokers {
        let logs = broker.dump();
        assert!(!logs.contains(SECRET), "the client secret reached the log");
        let token = held["token"].as_str().unwrap();
        assert!(!logs.contains(token), "a token reached the log");
    }
}

#[tokio::test]
async fn with_redis_down_client_credentials_are_fetched_directly_and_shared_again_after() {
    let mut redis = RedisServer::start().await;
    let (oauth, mcp) = protected(Duration::from_secs(3600)).await;
    let brokers = fleet(&config(&redis, &mcp.url, client_credentials()), 1).await;
    whoami_all(&brokers, "broker").await;
    assert_eq!(oauth.token_requests().len(), 1);

    // The held token goes on while Redis is down; a refused one is replaced directly.
    redis.stop().await;
    whoami_all(&brokers, "broker").await;
    oauth.revoke_all();
    let asked = tokio::time::Instant::now();
    whoami_all(&brokers, "broker").await;
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "no long wait on Redis"
    );
    assert_eq!(oauth.token_requests().len(), 2);

    // Back (empty): the next new token is stored there again.
    redis.restart().await;
    oauth.revoke_all();
    whoami_all(&brokers, "broker").await;
    assert_eq!(oauth.token_requests().len(), 3);
    assert!(stored(&redis).await.is_some(), "stored once Redis is back");
}

/// The refresh token of a token store or Redis value.
fn refresh_token(file: &Value) -> String {
    file["credentials"]["token_response"]["refresh_token"]
        .as_str()
        .expect("a refresh token")
        .to_owned()
}

/// Redeems `refresh` at `oauth` as the client `broker` would: the token endpoint's answer.
async fn redeem(oauth: &OAuthServer, resource: &str, refresh: &str) -> Value {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh),
        ("client_id", "broker"),
        ("client_secret", SECRET),
        ("resource", resource),
    ];
    reqwest::Client::new()
        .post(oauth.token_endpoint())
        .form(&form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_login_kept_in_redis_is_refreshed_once_for_the_fleet_with_its_rotated_token() {
    let redis = RedisServer::start().await;
    let (oauth, mcp) = protected(Duration::from_secs(8)).await;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("remote.json");
    let section = json!({
        "token_store": store.display().to_string(),
        "client_id": "broker",
        "client_secret_env": "REMOTE_SECRET",
        "scopes": ["mcp"],
    });
    let config = config(&redis, &mcp.url, section);
    let config_file = dir.path().join("config.yaml");
    std::fs::write(&config_file, config.text()).unwrap();

    let said = common::oauth_server::login(&config_file, &[("REMOTE_SECRET", SECRET)]).await;
    assert!(said.contains("written to Redis"), "{said}");
    assert!(
        !store.exists(),
        "the tokens went to Redis, not to the token store"
    );
    let logged_in = stored(&redis).await.expect("the login is in Redis");
    let first_refresh = refresh_token(&logged_in);

    // Two brokers use it; its access token (8 s) is refreshed halfway: both call on until it
    // is, then once more. The token endpoint answers late, so that both need the new token
    // while it is being got (without the lock, both would redeem the refresh token).
    let brokers = fleet(&config, 2).await;
    whoami_all(&brokers, "broker").await;
    oauth.set_token_delay(Duration::from_millis(500));
    common::poll("a refreshed token", Duration::from_millis(100), || async {
        whoami_all(&brokers, "broker").await;
        grants(&oauth.token_requests())
            .contains(&"refresh_token".to_owned())
            .then_some(())
    })
    .await;
    whoami_all(&brokers, "broker").await;
    let requests = oauth.token_requests();
    assert_eq!(
        grants(&requests),
        ["authorization_code", "refresh_token"],
        "refreshed once for the fleet: {requests:?}"
    );
    assert!(requests.iter().all(|r| r.error.is_none()), "{requests:?}");
    let rotated = refresh_token(&stored(&redis).await.unwrap());
    assert_ne!(
        rotated, first_refresh,
        "the rotated refresh token is in Redis"
    );

    // The first one was spent (the authorization server rotates them), and the one in Redis
    // is the live one.
    let replayed = redeem(&oauth, &mcp.url, &first_refresh).await;
    assert_eq!(replayed["error"], "invalid_grant", "{replayed}");
    let redeemed = redeem(&oauth, &mcp.url, &rotated).await;
    assert!(redeemed["access_token"].is_string(), "{redeemed}");
    for broker in &brokers {
        let logs = broker.dump();
        for secret in [first_refresh.as_str(), rotated.as_str()] {
            assert!(!logs.contains(secret), "a refresh token reached the log");
        }
    }
}

#[tokio::test]
async fn login_fails_saying_so_when_redis_cannot_be_reached() {
    let mut redis = RedisServer::start().await;
    redis.stop().await;
    let (_oauth, mcp) = protected(Duration::from_secs(3600)).await;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("remote.json");
    let section = json!({"token_store": store.display().to_string(), "scopes": ["mcp"]});
    let config_file = dir.path().join("config.yaml");
    std::fs::write(&config_file, config(&redis, &mcp.url, section).text()).unwrap();
    let output = tokio::time::timeout(
        STARTUP,
        tokio::process::Command::new(toolbroker_bin())
            .args([
                "login",
                "remote",
                "--no-browser",
                "--timeout",
                "20s",
                "--config",
            ])
            .arg(&config_file)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("login ended in time")
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("Redis") && stderr.contains(&format!("127.0.0.1:{}", redis.port)),
        "{stderr}"
    );
    assert!(!store.exists());
}
