//! The MCP face's bounds, tried with raw HTTP requests as a hostile page or client would: a
//! browser `Origin` not allowed is refused (403) on every method, every address and before any
//! session or call; sessions are capped per caller and in all (the oldest idle one closed to
//! make room, else 429 or 503 naming the setting); a session belongs to its caller (404 to
//! anyone else).

use crate::common::{
    self, Broker, demo,
    face::{borrow, initialize, open, send},
};
use serde_json::{Value, json};

/// A broker serving the demo server (prefix `d_`) on a face bound to `host` port 0, with `extra`
/// settings; the broker and the face's URL on 127.0.0.1.
async fn face(
    host: &str,
    extra: impl FnOnce(common::Builder) -> common::Builder,
) -> (Broker, String) {
    toolbroker::tls_provider::install();
    let builder = Broker::builder()
        .server(demo("demo").prefix("d_"))
        .top("mcp_listen", format!("{host}:0"));
    let broker = extra(builder).start().await;
    broker.wait_ready().await;
    let url = broker.face_url().await;
    (broker, url)
}

fn tools_list() -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
}

/// The status of a `tools/list` in `session`: 200 while it lives, 404 once it is closed.
async fn list_status(url: &str, session: &[(String, String)]) -> u16 {
    send(
        reqwest::Method::POST,
        url,
        &borrow(session),
        Some(tools_list()),
    )
    .await
    .0
}

#[tokio::test]
async fn a_page_from_an_origin_not_allowed_is_refused_on_every_method_and_address() {
    for host in ["0.0.0.0", "127.0.0.1"] {
        let (broker, url) = face(host, |b| {
            b.top("mcp_allowed_origins", json!(["https://app.example.com"]))
        })
        .await;
        let evil = ("origin", "http://evil.example");
        let (post, get, delete) = (
            reqwest::Method::POST,
            reqwest::Method::GET,
            reqwest::Method::DELETE,
        );

        let (status, _, _) = send(post.clone(), &url, &[evil], Some(initialize())).await;
        assert_eq!(status, 403, "{host}: initialize");
        // A session opened without a browser: its calls, its stream and its end are refused to
        // the page all the same, the call the face would answer itself included.
        let session = open(&url, &[]).await;
        let mut from_evil = borrow(&session);
        from_evil.push(evil);
        let echo = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                          "params": {"name": "d_echo", "arguments": {"message": "x"}}});
        let (status, _, _) = send(post.clone(), &url, &from_evil, Some(echo.clone())).await;
        assert_eq!(status, 403, "{host}: tools/call");
        let (status, _, _) = send(get.clone(), &url, &from_evil, None).await;
        assert_eq!(status, 403, "{host}: GET");
        let (status, _, _) = send(delete.clone(), &url, &from_evil, None).await;
        assert_eq!(status, 403, "{host}: DELETE");
        let metadata = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp");
        let (status, _, _) = send(get.clone(), &metadata, &[evil], None).await;
        assert_eq!(status, 403, "{host}: metadata");
        // The session lives on: the DELETE did nothing.
        let (status, answer, _) = send(post.clone(), &url, &borrow(&session), Some(echo)).await;
        assert_eq!(status, 200, "{host}: {answer:?}");

        // A listed origin, a loopback one, and no origin at all are served.
        for origin in [
            "https://app.example.com",
            "http://localhost:6274",
            "http://127.0.0.1:3000",
        ] {
            let (status, _, _) = send(
                post.clone(),
                &url,
                &[("origin", origin)],
                Some(initialize()),
            )
            .await;
            assert_eq!(status, 200, "{host}: {origin}");
        }
        let (status, _, _) = send(post, &url, &[], Some(initialize())).await;
        assert_eq!(status, 200, "{host}: no origin");

        let warned = broker.logs().iter().any(|line| {
            line["level"] == "WARN"
                && line["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("WITHOUT auth"))
        });
        assert_eq!(warned, host == "0.0.0.0", "{host}: the warning at start");
    }
}

#[tokio::test]
async fn check_refuses_a_malformed_origin_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    let text = "mcp_allowed_origins: [\"https://ok.example\", \"ok.example/path\"]\n\
                mcp_sessions_per_caller: 0\n";
    std::fs::write(&config, text).unwrap();
    let output = common::run_with_config(&["check", "--config"], &config);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("mcp_allowed_origins[1]: invalid origin \"ok.example/path\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("mcp_sessions_per_caller: must be between 1 and 100000, not 0"),
        "{stderr}"
    );
}

/// A broker whose face keeps 3 sessions per caller and 5 in all, for tokens alice, bob and
/// carol.
async fn capped() -> (Broker, String) {
    let tokens: Vec<Value> = ["alice", "bob", "carol"]
        .iter()
        .map(|name| json!({"name": name, "value_env": format!("TOKEN_{}", name.to_uppercase())}))
        .collect();
    face("127.0.0.1", |b| {
        b.top("auth", json!({"tokens": tokens}))
            .top("mcp_sessions_per_caller", 3)
            .top("mcp_max_sessions", 5)
            .env("TOKEN_ALICE", "token-alice")
            .env("TOKEN_BOB", "token-bob")
            .env("TOKEN_CAROL", "token-carol")
    })
    .await
}

const ALICE: (&str, &str) = ("authorization", "Bearer token-alice");
const BOB: (&str, &str) = ("authorization", "Bearer token-bob");
const CAROL: (&str, &str) = ("authorization", "Bearer token-carol");

/// Keeps a session busy: its client's standing GET stream, open while the response lives.
async fn stream(url: &str, session: &[(String, String)]) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .get(url)
        .header("accept", "text/event-stream");
    for (name, value) in session {
        request = request.header(name, value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    response
}

#[tokio::test]
async fn a_callers_new_session_closes_its_oldest_idle_one_and_spares_the_others() {
    let (_broker, url) = capped().await;
    let mut alice = Vec::new();
    for _ in 0..3 {
        alice.push(open(&url, &[ALICE]).await);
    }
    let bob = [open(&url, &[BOB]).await, open(&url, &[BOB]).await];
    // Alice churns: each new session closes her oldest idle one, never Bob's.
    for round in 0..3 {
        alice.push(open(&url, &[ALICE]).await);
        assert_eq!(list_status(&url, &alice[round]).await, 404, "round {round}");
        for session in &alice[round + 1..] {
            assert_eq!(list_status(&url, session).await, 200, "round {round}");
        }
        for session in &bob {
            assert_eq!(
                list_status(&url, session).await,
                200,
                "Bob's, round {round}"
            );
        }
    }
    // Five open, the face's cap: Carol's closes the oldest idle one of anyone's.
    let carol = open(&url, &[CAROL]).await;
    let live: Vec<&Vec<(String, String)>> = alice[3..].iter().chain(&bob).collect();
    let mut closed = 0;
    for session in live {
        if list_status(&url, session).await == 404 {
            closed += 1;
        }
    }
    assert_eq!(closed, 1, "one closed to make room");
    assert_eq!(list_status(&url, &carol).await, 200);
}

#[tokio::test]
async fn with_no_session_idle_a_new_one_is_refused_naming_the_cap() {
    let (_broker, url) = capped().await;
    let alice: Vec<_> = [
        open(&url, &[ALICE]).await,
        open(&url, &[ALICE]).await,
        open(&url, &[ALICE]).await,
    ]
    .into();
    let mut streams = Vec::new();
    for session in &alice {
        streams.push(stream(&url, session).await);
    }
    let (status, answer, _) = send(reqwest::Method::POST, &url, &[ALICE], Some(initialize())).await;
    assert_eq!(status, 429);
    let error = &answer.unwrap()["error"];
    assert_eq!(error["data"]["limit"], "mcp_sessions_per_caller", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("mcp_sessions_per_caller")
    );
    for session in &alice {
        assert_eq!(list_status(&url, session).await, 200);
    }

    let bob = [open(&url, &[BOB]).await, open(&url, &[BOB]).await];
    for session in &bob {
        streams.push(stream(&url, session).await);
    }
    let (status, answer, _) = send(reqwest::Method::POST, &url, &[CAROL], Some(initialize())).await;
    assert_eq!(status, 503);
    assert_eq!(
        answer.unwrap()["error"]["data"]["limit"],
        "mcp_max_sessions"
    );
    // A session ended by its client makes room.
    let (status, _, _) = send(reqwest::Method::DELETE, &url, &borrow(&bob[1]), None).await;
    assert_eq!(status, 202);
    let carol = open(&url, &[CAROL]).await;
    assert_eq!(list_status(&url, &carol).await, 200);
    for session in alice.iter().chain(&bob[..1]) {
        assert_eq!(list_status(&url, session).await, 200);
    }
    drop(streams);
}

#[tokio::test]
async fn a_session_answers_only_its_own_caller() {
    let (_broker, url) = capped().await;
    let alice = open(&url, &[ALICE]).await;
    let mut as_bob: Vec<(String, String)> = alice
        .iter()
        .filter(|(name, _)| name != "authorization")
        .cloned()
        .collect();
    as_bob.push((BOB.0.into(), BOB.1.into()));
    let (post, get, delete) = (
        reqwest::Method::POST,
        reqwest::Method::GET,
        reqwest::Method::DELETE,
    );
    let (status, _, _) = send(post, &url, &borrow(&as_bob), Some(tools_list())).await;
    assert_eq!(status, 404, "POST");
    let (status, _, _) = send(get, &url, &borrow(&as_bob), None).await;
    assert_eq!(status, 404, "GET");
    let (status, _, _) = send(delete, &url, &borrow(&as_bob), None).await;
    assert_eq!(status, 404, "DELETE");
    assert_eq!(list_status(&url, &alice).await, 200, "still Alice's");
}
