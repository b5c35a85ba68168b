//! MCP 2026-07-28 upstream: a server that speaks only 2026-07-28 (it refuses `initialize`) is
//! found with `server/discover` and spoken to stateless over stdio and streamable HTTP; its
//! questions (MRTR `input_required`) reach the caller's own stream and its `requestState` goes
//! back unchanged; its list changes and resource updates come on `subscriptions/listen`; a
//! server from before 2026-07-28 is spoken to with the handshake, as before.

use std::time::Duration;

use serde_json::{Value, json};
use tonic::Code;
use toolbroker::proto::{self, call_tool_stream_response::Event};

use crate::common::{
    self, Broker, config::modern, demo, interactive, python::InteractiveHttpServer, url_server,
};
use crate::{
    protocol_2026::answered_in_rounds,
    streaming::{broker_with_callers, two_callers_ask},
};

/// A broker with the 2026-only server over stdio (`m_`) and HTTP (`h_`), a 2025 one (`py_`)
/// and the demo server (unprefixed).
async fn broker(http: &InteractiveHttpServer) -> Broker {
    let broker = Broker::builder()
        .server(modern("modern").prefix("m_"))
        .server(url_server("modern-http", &http.url).prefix("h_"))
        .server(interactive("legacy").prefix("py_"))
        .server(demo("demo"))
        .top("mcp_listen", "127.0.0.1:0")
        .start()
        .await;
    broker.wait_ready().await;
    broker
}

#[tokio::test]
async fn each_server_is_spoken_to_in_its_own_protocol_and_answers_in_rounds() {
    let http = InteractiveHttpServer::modern().await;
    let broker = broker(&http).await;

    let versions: Vec<(String, String)> = broker
        .servers()
        .await
        .into_iter()
        .map(|status| (status.name, status.protocol_version))
        .collect();
    for (name, version) in [
        ("modern", "2026-07-28"),
        ("modern-http", "2026-07-28"),
        ("legacy", "2025-11-25"),
        ("demo", "2026-07-28"),
    ] {
        assert!(
            versions.contains(&(name.to_owned(), version.to_owned())),
            "{name} speaks {version}: {versions:?}"
        );
    }

    for prefix in ["m_", "h_"] {
        let echoed = broker
            .text(&format!("{prefix}echo"), r#"{"text": "hi"}"#)
            .await;
        assert_eq!(echoed, "echo: hi");

        // A streaming call's client is asked; the server's sealed state comes back unchanged.
        let tool = format!("{prefix}ask");
        let mut stream = broker
            .stream_call(None, &tool, r#"{"question": "Who?"}"#)
            .await
            .unwrap();
        let asked = match stream.next().await.unwrap() {
            Some(Event::Elicitation(asked)) => asked,
            other => panic!("expected the question, got {other:?}"),
        };
        assert_eq!(asked.message, "Who?");
        stream
            .answer_elicitation(&asked.id, "accept", Some(json!({"answer": "Ada"})))
            .await;
        let (_, result) = stream.result().await.unwrap();
        assert_eq!(
            (result.text.as_str(), result.is_error),
            ("accepted: Ada", false)
        );

        // A unary call's request declares no elicitation: the server does not ask.
        let unary = broker.call(&tool, r#"{"question": "Who?"}"#).await.unwrap();
        assert!(
            unary.is_error && unary.text.contains("declared no elicitation"),
            "{unary:?}"
        );
    }

    // Sampling, answered by the client's model; refused by it, or asked of a unary call.
    let tool = "m_sample";
    let mut stream = broker
        .stream_call(None, tool, r#"{"prompt": "Say hi"}"#)
        .await
        .unwrap();
    let Some(Event::Sampling(request)) = stream.next().await.unwrap() else {
        panic!("expected a sampling request");
    };
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "hi!"},
        "model": "test-model", "stopReason": "endTurn"});
    stream.answer_sampling(&request.id, Ok(answer)).await;
    let (_, result) = stream.result().await.unwrap();
    assert_eq!(result.text, "model said: hi!");

    let mut refused = broker
        .stream_call(None, tool, r#"{"prompt": "Say hi"}"#)
        .await
        .unwrap();
    let Some(Event::Sampling(request)) = refused.next().await.unwrap() else {
        panic!("expected a sampling request");
    };
    refused
        .answer_sampling(&request.id, Err("the user said no"))
        .await;
    let status = refused.result().await.unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("the user said no"), "{status:?}");
    let unary = broker.call(tool, r#"{"prompt": "x"}"#).await.unwrap_err();
    assert_eq!(unary.code(), Code::FailedPrecondition, "{unary:?}");
    assert!(unary.message().contains("CallToolStream"), "{unary:?}");

    // The demo server asks in rounds too, and a 2025 server as before.
    let mut stream = broker
        .stream_call(None, "ask", r#"{"question": "Colour?"}"#)
        .await
        .unwrap();
    let Some(Event::Elicitation(asked)) = stream.next().await.unwrap() else {
        panic!("expected the question");
    };
    stream
        .answer_elicitation(&asked.id, "accept", Some(json!({"answer": "blue"})))
        .await;
    assert_eq!(
        stream.result().await.unwrap().1.text,
        "the user answered: blue"
    );
    assert_eq!(
        broker.text("py_chatty", r#"{"count": 1}"#).await,
        "logged 1"
    );
}

#[tokio::test]
async fn list_changes_and_resource_updates_come_on_the_listen_stream() {
    let http = InteractiveHttpServer::modern().await;
    let broker = broker(&http).await;
    for prefix in ["m_", "h_"] {
        let grown = format!("{prefix}sprout");
        let said = broker
            .text(&format!("{prefix}grow"), r#"{"name": "sprout"}"#)
            .await;
        assert_eq!(said, "grew sprout");
        common::poll(
            "the grown tool, listed after the server's list_changed",
            Duration::from_millis(50),
            || async {
                let tools = broker.tools().await.tools;
                tools.iter().any(|tool| tool.name == grown).then_some(())
            },
        )
        .await;
        assert_eq!(broker.text(&grown, "{}").await, "I am sprout");
    }

    // A face client subscribed to a 2026 server's resource hears of its update.
    let url = broker.face_url().await;
    let seen = common::python::run_script(
        "face_listen.py",
        &[&url, "memo://note", "m_touch", r#"{"text": "second"}"#],
    )
    .await;
    assert_eq!(seen["honored"], json!(["memo://note"]), "{seen}");
    assert_eq!(seen["updated"], "memo://note", "{seen}");
}

#[tokio::test]
async fn two_callers_of_a_2026_server_are_each_asked_their_own_question() {
    // One shared session: each question is the answer to the request the broker sent for one
    // caller's call, so it goes to that call's stream and nowhere else, even with both in flight.
    // Per-caller sessions (each caller's own process) likewise.
    for server in [
        modern("modern").prefix("m_"),
        modern("modern").prefix("m_").set("isolation", "per-caller"),
    ] {
        let broker = broker_with_callers(server).await;
        let seen = two_callers_ask(&broker, "m_ask", true).await;
        assert_eq!(
            seen,
            [
                Some("question for alice".into()),
                Some("question for bob".into())
            ]
        );
    }
}

/// As an SDK from before 2026-07-28 that takes nothing before `initialize` does: anything else
/// first, and it exits. (The demo server behind it speaks both; it sees the handshake.) Each
/// start appends a line to `starts`.
fn strict(starts: &std::path::Path) -> common::Server {
    let script = r#"echo start >> "$1"
read -r first
case "$first" in
  *'"method":"initialize"'*) ;;
  *) echo "expected initialize first, got: $first" >&2; exit 3 ;;
esac
{ printf '%s\n' "$first"; exec cat; } | exec "$0" demo-server"#;
    let starts = starts.display().to_string();
    common::command(
        "strict",
        "sh",
        &["-c", script, common::toolbroker_bin(), &starts],
    )
}

/// The lines of `starts`: how many times the server was started.
fn started(starts: &std::path::Path) -> usize {
    std::fs::read_to_string(starts)
        .unwrap_or_default()
        .lines()
        .count()
}

#[tokio::test]
async fn a_server_that_exits_on_the_probe_is_started_again_with_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    let broker = Broker::builder()
        .server(strict(&starts).prefix("s_"))
        .start()
        .await;
    broker.wait_ready().await;
    let status = broker.server("strict").await;
    assert_eq!(status.protocol_version, "2025-11-25", "{status:?}");
    assert_eq!(status.restarts, 0, "one start, not a failure: {status:?}");
    assert_eq!(broker.text("s_echo", r#"{"message": "hi"}"#).await, "hi");
    assert_eq!(
        started(&starts),
        2,
        "probed once, then started with the handshake"
    );
}

#[tokio::test]
async fn the_servers_era_is_remembered_for_its_callers_sessions() {
    // The discovery session learns the server speaks the handshake; each caller's own session
    // then starts with it at once: one process each, not two.
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    let per_caller = strict(&starts).prefix("s_").set("isolation", "per-caller");
    let broker = broker_with_callers(per_caller).await;
    assert_eq!(
        started(&starts),
        2,
        "the discovery session: probed, then the handshake"
    );
    for caller in ["alice", "bob"] {
        let answer = broker
            .call_as(Some(caller), &[], "s_echo", r#"{"message": "hi"}"#)
            .await
            .unwrap();
        assert_eq!(answer.text, "hi", "{caller}");
    }
    assert_eq!(started(&starts), 4, "one start per caller");
}

#[tokio::test]
async fn a_2026_client_of_the_face_answers_a_2026_servers_questions() {
    // 2026-07-28 on both sides: the server's `input_required` becomes the face's own, with a
    // state the broker minted; the client's answers go back to the server in its own round.
    let http = InteractiveHttpServer::modern().await;
    let broker = broker(&http).await;
    let url = broker.face_url().await;
    let seen = common::python::run_script("face_rounds.py", &[&url, "m_"]).await;
    answered_in_rounds(&seen);
    assert!(
        seen["unasked"]
            .as_str()
            .is_some_and(|text| text.contains("declared no elicitation")),
        "a client that cannot answer is not asked: {seen}"
    );
}

#[tokio::test]
async fn mcp_stdio_asks_a_2026_client_in_rounds() {
    // The bridge has no requests to send a 2026-07-28 client either: its calls' questions
    // (from a 2025 server's requests or a 2026 server's rounds) become rounds of its own.
    let http = InteractiveHttpServer::modern().await;
    let broker = broker(&http).await;
    let addr = broker.addr.to_string();
    for prefix in ["py_", "m_"] {
        let bridge = [common::toolbroker_bin(), "mcp-stdio", "--broker", &addr];
        let args = [&["--stdio", prefix][..], &bridge[..]].concat();
        let seen = common::python::run_script("face_rounds.py", &args).await;
        answered_in_rounds(&seen);
        assert_eq!(seen["unasked"], "declined", "{prefix}: {seen}");
    }
}

#[tokio::test]
async fn a_listener_hears_only_of_resources_it_may_read() {
    // Both may call m_touch; only the owner may read the server's resources. The other
    // listens for the same resource while the owner's subscription is live upstream, and
    // touches it: the owner hears of it, the other does not.
    let auth = json!({"tokens": [
        {"name": "owner", "value_env": "OWNER", "tools": ["m_touch"], "resources": ["modern"]},
        {"name": "other", "value_env": "OTHER", "tools": ["m_touch"]},
    ]});
    let broker = Broker::builder()
        .server(modern("modern").prefix("m_"))
        .top("auth", auth)
        .top("mcp_listen", "127.0.0.1:0")
        .env("OWNER", "owner-token")
        .env("OTHER", "other-token")
        .start()
        .await;
    broker.wait_ready().await;
    let url = broker.face_url().await;
    let args = [&url, "memo://note", "m_touch", "owner-token", "other-token"];
    let seen = common::python::run_script("face_listen_two.py", &args).await;
    assert_eq!(seen["owner_honored"], json!(["memo://note"]), "{seen}");
    assert_eq!(seen["other_honored"], json!([]), "{seen}");
    assert_eq!(
        seen["owner_heard"], "memo://note",
        "the other's touch: {seen}"
    );
    assert_eq!(seen["other_heard"], Value::Null, "{seen}");
}

#[tokio::test]
async fn parameters_sent_as_headers_are_sent_upstream_and_checked_on_the_face() {
    let http = InteractiveHttpServer::modern().await;
    let broker = broker(&http).await;
    // The broker's HTTP client mirrors `region` as `Mcp-Param-Region`, which the server checks.
    let answer = broker.text("h_where", r#"{"region": "eu"}"#).await;
    assert_eq!(answer, "region eu");

    // The face checks a 2026-07-28 client's header against the argument it mirrors.
    toolbroker::tls_provider::install();
    let url = broker.face_url().await;
    let params = json!({"name": "m_where", "arguments": {"region": "eu"}});
    let call = |region: Option<&'static str>| {
        let (url, params) = (url.clone(), params.clone());
        async move {
            let mut headers = vec![("mcp-name", "m_where")];
            headers.extend(region.map(|region| ("mcp-param-region", region)));
            common::face::stateless(&url, &headers, "tools/call", params).await
        }
    };
    let (status, answer) = call(Some("eu")).await;
    assert_eq!(status, 200, "{answer:?}");
    let result = &answer.unwrap()["result"];
    assert_eq!(result["content"][0]["text"], "region eu");
    // The face answers as itself: the server's name in the result's `_meta` is not passed on.
    let named = &result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"];
    assert_ne!(named, "modern-test-server", "{result}");
    for wrong in [Some("us"), None] {
        let (status, answer) = call(wrong).await;
        assert_eq!(status, 400, "{wrong:?}: {answer:?}");
        assert_eq!(answer.unwrap()["error"]["code"], -32020, "{wrong:?}");
    }
}

#[tokio::test]
async fn a_server_that_ignores_the_probe_is_started_with_the_handshake_next() {
    // It reads past anything before `initialize`, answering nothing; with an init_timeout
    // shorter than rmcp's 10 s probe, the first start runs out of time, and the next one
    // starts with the handshake.
    let script = r#"while read -r first; do
  case "$first" in *'"method":"initialize"'*) break ;; esac
done
{ printf '%s\n' "$first"; exec cat; } | exec "$0" demo-server"#;
    let silent = common::command("silent", "sh", &["-c", script, common::toolbroker_bin()])
        .prefix("q_")
        .set("init_timeout", "1s");
    let broker = Broker::builder().server(silent).start().await;
    broker
        .wait_for_state("silent", proto::ServerState::Ready)
        .await;
    assert_eq!(broker.text("q_echo", r#"{"message": "hi"}"#).await, "hi");
    let status = broker.server("silent").await;
    assert_eq!(status.protocol_version, "2025-11-25", "{status:?}");
    assert_eq!(
        status.restarts, 1,
        "one start out of time, then the handshake: {status:?}"
    );
}
