//! Callers with identities: JWTs verified against a JWKS (a file, or a URL fetched again for a
//! new key), their claims granting tools, beside static tokens; and every bad JWT refused with
//! UNAUTHENTICATED saying which check failed.

use std::time::Duration;

use crate::common::{
    self, Broker, as_caller, demo,
    issuer::{AUDIENCE, ISSUER, JwksServer, Key, claims, jwks_file, now},
};
use serde_json::{Value, json};
use tonic::Code;
use toolbroker::proto;

/// `auth` with a static token `ops-token` (every tool) and JWTs from the test issuer whose
/// `scope` grants tools, their keys at `keys` (`jwks_file` or `jwks_url`).
fn auth(keys: Value) -> Value {
    let mut jwt = json!({
        "issuer": ISSUER,
        "audience": AUDIENCE,
        "grants_claim": "scope",
        "grants": {"tools:echo": ["echo"], "tools:math": ["add", "stats"], "tools:all": ["*"]},
    });
    jwt.as_object_mut()
        .unwrap()
        .extend(keys.as_object().unwrap().clone());
    json!({"tokens": [{"name": "ops", "value_env": "OPS_TOKEN"}], "jwt": jwt})
}

async fn broker(keys: Value) -> Broker {
    let broker = Broker::builder()
        .top("auth", auth(keys))
        .env("OPS_TOKEN", "ops-token")
        .server(demo("demo"))
        .start()
        .await;
    common::wait_health(broker.channel.clone(), "toolbroker.v1.ToolBroker").await;
    broker
}

async fn listed(broker: &Broker, token: &str) -> Vec<String> {
    let request = as_caller(Some(token), &[], proto::ListToolsRequest::default());
    let tools = broker.client.clone().list_tools(request).await.unwrap();
    tools
        .into_inner()
        .tools
        .into_iter()
        .map(|t| t.name)
        .collect()
}

#[tokio::test]
async fn a_jwt_caller_sees_and_calls_what_its_claims_grant() {
    let key = Key::generate("k1");
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(json!({"jwks_file": jwks_file(dir.path(), &[&key])})).await;

    let echo_only = key.token("alice", json!({"scope": "openid tools:echo"}));
    assert_eq!(listed(&broker, &echo_only).await, ["echo"]);
    let answer = broker
        .call_as(Some(&echo_only), &[], "echo", r#"{"message": "hi"}"#)
        .await
        .unwrap();
    assert_eq!(answer.text, "hi");
    let denied = broker
        .call_as(Some(&echo_only), &[], "add", r#"{"a": 1, "b": 2}"#)
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert!(
        denied.message().contains("\"alice\""),
        "{}",
        denied.message()
    );

    // An array claim works as well as a space-separated one; grants add up.
    let math_and_echo = key.token("bob", json!({"scope": ["tools:math", "tools:echo"]}));
    assert_eq!(
        listed(&broker, &math_and_echo).await,
        ["add", "echo", "stats"]
    );
    // Granted nothing, sees nothing.
    let nothing = key.token("carol", json!({"scope": "openid"}));
    assert!(listed(&broker, &nothing).await.is_empty());
    // A static token still works beside JWTs.
    assert!(
        listed(&broker, "ops-token")
            .await
            .contains(&"whoami".to_owned())
    );
}

#[tokio::test]
async fn every_bad_jwt_is_unauthenticated_saying_which_check_failed() {
    use base64::Engine as _;
    let key = Key::generate("k1");
    let stranger = Key::generate("k1");
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(json!({"jwks_file": jwks_file(dir.path(), &[&key])})).await;
    let with = |change: &dyn Fn(&mut Value)| {
        let mut claims = claims("mallory");
        change(&mut claims);
        key.sign(&claims)
    };
    let b64 = |v: &Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    };
    let alg_none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&claims("mallory"))
    );
    // HS256 with the issuer's public key as the secret: the classic key-confusion attack.
    let public_key = serde_json::to_string(&key.jwk).unwrap();
    let hmac = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims("mallory"),
        &jsonwebtoken::EncodingKey::from_secret(public_key.as_bytes()).unwrap(),
    )
    .unwrap();
    let cases = [
        (with(&|c| c["exp"] = json!(now() - 600)), "expired"),
        (with(&|c| c["nbf"] = json!(now() + 600)), "not valid yet"),
        (with(&|c| c["aud"] = json!("someone-else")), "(aud)"),
        (with(&|c| c["iss"] = json!("https://evil.test")), "(iss)"),
        (
            stranger.sign(&claims("mallory")),
            "signature does not verify",
        ),
        (
            Key::generate("k9").sign(&claims("mallory")),
            "no key with kid \"k9\"",
        ),
        (alg_none, "algorithm none is not accepted"),
        (hmac, "algorithm HS256 is not accepted"),
    ];
    for (token, says) in cases {
        let refused = broker
            .call_as(Some(&token), &[], "echo", r#"{"message": "x"}"#)
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::Unauthenticated, "{says}: {refused:?}");
        assert!(
            refused.message().contains(says),
            "{says}: {}",
            refused.message()
        );
    }
    // No refusal reached the server, and no token reached the log.
    assert!(
        !broker.dump().contains("mallory"),
        "tokens stay out of the log"
    );
}

#[tokio::test]
async fn a_jwks_url_is_fetched_at_start_and_again_for_a_rotated_key() {
    let old = Key::generate("old");
    let new = Key::generate("new");
    let jwks = JwksServer::start(&[&old]).await;
    let broker = broker(json!({"jwks_url": jwks.url, "jwks_refetch_interval": "1s"})).await;
    let scoped = |key: &Key| key.token("dave", json!({"scope": "tools:echo"}));
    let answer = broker
        .call_as(Some(&scoped(&old)), &[], "echo", r#"{"message": "old"}"#)
        .await
        .unwrap();
    assert_eq!(answer.text, "old");

    // The issuer rotates its key: a token with the new kid makes the broker fetch again (at
    // most once per jwks_refetch_interval, so it may take a second).
    jwks.rotate(&[&new]);
    let answer = common::poll(
        "the new key fetched",
        Duration::from_millis(200),
        || async {
            let called = broker
                .call_as(Some(&scoped(&new)), &[], "echo", r#"{"message": "new"}"#)
                .await;
            called
                .inspect_err(|status| {
                    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
                    assert!(status.message().contains("\"new\""), "{status:?}");
                })
                .ok()
        },
    )
    .await;
    assert_eq!(answer.text, "new");
    // A few tries, yet the JWKS was fetched only as the interval allows.
    let fetches = jwks.fetches();
    assert!((2..=4).contains(&fetches), "{fetches} fetches");
}

#[tokio::test]
async fn check_reads_the_jwks_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.json").display().to_string();
    let config = json!({"auth": auth(json!({"jwks_file": missing}))});
    let path = dir.path().join("broker.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let output = std::process::Command::new(common::toolbroker_bin())
        .args(["check", "--config"])
        .arg(&path)
        .env("OPS_TOKEN", "x")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("auth.jwt.jwks_file: cannot read"),
        "{stderr}"
    );
}
