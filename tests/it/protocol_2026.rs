//! MCP 2026-07-28 on the broker's faces: what a client of that protocol gets from `/mcp` and
//! from `mcp-stdio` (every result valid against the protocol's schema, as the Python SDK's
//! `mcp_types` checks it; `resultType`; `ttlMs` and `cacheScope`), and the Python SDK's client
//! driving both faces in both of its modes.

use serde_json::{Value, json};

use crate::common::{
    self, Broker,
    config::{Server, demo, everything, interactive},
    face, toolbroker_bin,
};

/// The token of a caller that may use everything.
const AGENT: &str = "agent-token";
/// The token of a caller that may call `d_echo` only.
const ALICE: &str = "alice-token";

/// Every raw answer valid and complete (or, for the methods in `refused`, refused), each
/// list and read with `list_scope` (`server/discover` public), a read reusable for
/// `read_ttl_ms`: the rows that break this, as text.
fn wrong_rows(seen: &Value, list_scope: &str, read_ttl_ms: u64, refused: &[&str]) -> Vec<String> {
    let mut wrong = Vec::new();
    for row in seen["raw"].as_array().expect("raw answers") {
        let method = row["method"].as_str().unwrap();
        if refused.contains(&method) {
            if row.get("error").is_none() {
                wrong.push(format!("{method}: answered, where it is refused: {row}"));
            }
            continue;
        }
        if !row["invalid"].is_null()
            || row.get("error").is_some()
            || row["resultType"] != "complete"
        {
            wrong.push(format!("{method}: {row}"));
            continue;
        }
        // What a face says of itself is the same for everyone.
        let scope = match method {
            "server/discover" => "public",
            _ => list_scope,
        };
        let cacheable = method.ends_with("/list") || method == "server/discover";
        if cacheable && (row["ttlMs"] != json!(30_000) || row["cacheScope"] != scope) {
            wrong.push(format!("{method}: hints {row}, expected 30000 {scope}"));
        }
        if method == "resources/read"
            && (row["ttlMs"] != json!(read_ttl_ms) || row["cacheScope"] != list_scope)
        {
            wrong.push(format!(
                "{method}: hints {row}, expected {read_ttl_ms} {list_scope}"
            ));
        }
    }
    wrong
}

/// The SDK's client in "legacy" and "auto" mode: each settled on its protocol and saw the
/// demo's tools, titles, echo, prompt and resource.
fn check_modes(seen: &Value) {
    for (mode, version) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        let saw = &seen["modes"][mode];
        assert_eq!(saw["version"], version, "{mode}: {saw}");
        assert_eq!(saw["tools"], 13, "{mode}: {saw}");
        assert_eq!(
            saw["titles"],
            json!(["Add integers", "Echo"]),
            "{mode}: {saw}"
        );
        assert_eq!(saw["echo"], format!("from {mode}"), "{mode}: {saw}");
        assert_eq!(saw["prompt"], "Summarize MCP.", "{mode}: {saw}");
        assert_eq!(saw["readme"], "The toolbroker demo ", "{mode}: {saw}");
    }
}

#[tokio::test]
async fn the_face_answers_a_2026_client_with_valid_complete_results_that_anyone_may_reuse() {
    let broker = Broker::demo_with_face().await;
    let seen = common::python::run_script("face_2026.py", &[&broker.face_url().await]).await;
    // The demo server lets its (unchanging) resources be reused for an hour, by anyone.
    let wrong = wrong_rows(&seen, "public", 3_600_000, &[]);
    assert!(wrong.is_empty(), "{wrong:#?}");
    check_modes(&seen);
}

#[tokio::test]
async fn mcp_stdio_answers_a_2026_client_with_valid_complete_results_for_its_caller_only() {
    let broker = Broker::builder()
        .server(demo("demo").prefix("d_"))
        .start()
        .await;
    broker.wait_ready().await;
    let addr = broker.addr.to_string();
    let seen = common::python::run_script(
        "face_2026.py",
        &["--stdio", toolbroker_bin(), "mcp-stdio", "--broker", &addr],
    )
    .await;
    // The bridge offers no completions (it has no gRPC method to ask for them).
    // ReadResource over gRPC carries no reuse hint: the bridge says "do not reuse".
    let wrong = wrong_rows(&seen, "private", 0, &["completion/complete"]);
    assert!(wrong.is_empty(), "{wrong:#?}");
    check_modes(&seen);
}

/// `tools/list`'s `cacheScope` through the face for the caller with `token`.
async fn list_scope(url: &str, token: &str) -> Value {
    let auth = format!("Bearer {token}");
    let (status, answer) =
        face::stateless(url, &[("authorization", &auth)], "tools/list", json!({})).await;
    assert_eq!(status, 200, "{answer:?}");
    answer.expect("an answer")["result"]["cacheScope"].clone()
}

#[tokio::test]
async fn a_list_shaped_by_grants_or_a_per_caller_server_is_private() {
    toolbroker::tls_provider::install();
    let tokens = json!([
        {"name": "agent", "value_env": "AGENT"},
        {"name": "alice", "value_env": "ALICE", "tools": ["d_echo"]},
    ]);
    let start = |servers: Vec<Server>| {
        Broker::builder()
            .top("auth", json!({ "tokens": tokens.clone() }))
            .env("AGENT", AGENT)
            .env("ALICE", ALICE)
            .top("mcp_listen", "127.0.0.1:0")
            .servers(servers)
            .start()
    };
    let shared = start(vec![demo("demo").prefix("d_")]).await;
    shared.wait_ready().await;
    let url = shared.face_url().await;
    assert_eq!(
        list_scope(&url, AGENT).await,
        "public",
        "a caller who sees all"
    );
    assert_eq!(
        list_scope(&url, ALICE).await,
        "private",
        "a caller its grants restrict"
    );

    let per_caller = demo("pc").prefix("p_").set("isolation", "per-caller");
    let with_per_caller = start(vec![demo("demo").prefix("d_"), per_caller]).await;
    with_per_caller.wait_ready().await;
    let url = with_per_caller.face_url().await;
    assert_eq!(
        list_scope(&url, AGENT).await,
        "private",
        "a catalog with a per-caller server"
    );
}

#[tokio::test]
async fn a_2026_listener_gets_updates_of_the_resources_it_asked_for() {
    toolbroker::tls_provider::install();
    let broker = Broker::builder()
        .server(everything("everything").prefix("e_"))
        .top("mcp_listen", "127.0.0.1:0")
        .start()
        .await;
    broker.wait_ready().await;
    let seen = common::python::run_script("face_listen.py", &[&broker.face_url().await]).await;
    assert_eq!(seen["version"], "2026-07-28", "{seen}");
    let honored = seen["honored"].as_array().expect("honored URIs");
    assert_eq!(honored.len(), 1, "only the URI a server lists: {seen}");
    assert_eq!(seen["updated"], honored[0], "{seen}");
}

/// A broker with the interactive Python server (`py_`) behind the face, and its face's URL.
async fn interactive_face(auth: Option<Value>) -> (Broker, String) {
    toolbroker::tls_provider::install();
    let mut builder = Broker::builder()
        .server(interactive("py").prefix("py_"))
        .top("mcp_listen", "127.0.0.1:0")
        .env("AGENT", AGENT)
        .env("ALICE", ALICE);
    if let Some(auth) = auth {
        builder = builder.top("auth", auth);
    }
    let broker = builder.start().await;
    broker.wait_ready().await;
    let url = broker.face_url().await;
    (broker, url)
}

#[tokio::test]
async fn a_2026_client_answers_elicitation_and_sampling_in_rounds() {
    let (_broker, url) = interactive_face(None).await;
    let seen = common::python::run_script("face_rounds.py", &[&url]).await;
    answered_in_rounds(&seen);
    assert_eq!(
        seen["unasked"], "declined",
        "no elicitation declared: not asked: {seen}"
    );
}

/// What `face_rounds.py` saw when both questions were asked and answered in rounds.
pub(crate) fn answered_in_rounds(seen: &Value) {
    assert_eq!(seen["version"], "2026-07-28", "{seen}");
    assert_eq!(seen["ask"], "accepted: blue", "{seen}");
    assert_eq!(seen["sample"], "model said: hi!", "{seen}");
    assert_eq!(
        seen["asked"],
        json!(["Favourite colour?", "Say hi"]),
        "{seen}"
    );
}

/// `tools/call` of `py_ask` through the face as a 2026-07-28 client that can answer
/// elicitation, with `token`, `question` and what `extra` adds to the params: the JSON-RPC
/// answer.
async fn ask(url: &str, token: &str, question: &str, extra: Value) -> Value {
    let mut params = json!({
        "name": "py_ask",
        "arguments": {"question": question},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        },
    });
    for (key, value) in extra.as_object().unwrap() {
        params[key] = value.clone();
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "py_ask"),
    ];
    let (status, answer, _) = face::post(url, &headers, body).await;
    answer.unwrap_or_else(|| panic!("no JSON-RPC answer (HTTP {status})"))
}

#[tokio::test]
async fn a_request_state_is_good_once_for_its_caller_and_call_only() {
    let tokens = json!([
        {"name": "agent", "value_env": "AGENT"},
        {"name": "alice", "value_env": "ALICE", "tools": ["py_ask"]},
    ]);
    let (_broker, url) = interactive_face(Some(json!({ "tokens": tokens }))).await;
    let asked = ask(&url, ALICE, "Colour?", json!({})).await;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    assert_eq!(
        result["inputRequests"]["question"]["method"], "elicitation/create",
        "{asked}"
    );
    let state = result["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned();
    let answered = json!({"question": {"action": "accept", "content": {"answer": "red"}}});
    let retry = |state: &str| json!({"requestState": state, "inputResponses": answered.clone()});

    let refused = |answer: &Value| {
        answer["error"]["code"] == -32602
            && answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("requestState"))
    };
    // Another caller replays it.
    let replayed = ask(&url, AGENT, "Colour?", retry(&state)).await;
    assert!(refused(&replayed), "another caller: {replayed}");
    // The caller changes a byte of it.
    let mut forged = state.clone().into_bytes();
    let last = forged.len() - 1;
    forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap();
    let tampered = ask(&url, ALICE, "Colour?", retry(&forged)).await;
    assert!(refused(&tampered), "a forged state: {tampered}");
    // The caller sends it with another call (other arguments).
    let other = ask(&url, ALICE, "Size?", retry(&state)).await;
    assert!(refused(&other), "another call: {other}");
    // None of that took it: its caller, with its call, resumes it.
    let done = ask(&url, ALICE, "Colour?", retry(&state)).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "accepted: red",
        "{done}"
    );
    // Used once.
    let again = ask(&url, ALICE, "Colour?", retry(&state)).await;
    assert!(refused(&again), "a used state: {again}");
}
