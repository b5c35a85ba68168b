//! One caller never reaches or holds another through an upstream server, played by a hostile
//! caller over real processes: what a shared stdio server asks and logs during one caller's
//! `prompts/get` never reaches another caller's streaming call (nor does that caller's answer
//! come back as the first one's result); a caller that changes a header value on every call
//! cannot start a process per call (`max_sessions_per_caller`, and `max_sessions` counting
//! sessions that still finish their calls); and one caller's slow calls do not hold another's
//! on a per-caller server (`max_concurrent_calls` and its queue are each caller's).

use crate::common::{self, Broker, Server, WAIT, demo, interactive, stream::StreamCall};
use serde_json::json;
use tokio::task::JoinHandle;
use tonic::{Code, Status};
use toolbroker::proto::{self, call_tool_stream_response::Event};

/// A broker whose callers are `names`, each with the static token `token-<name>`.
async fn broker(names: &[&str], server: Server) -> Broker {
    let tokens: Vec<_> = (names.iter().enumerate())
        .map(|(i, name)| json!({"name": name, "value_env": format!("TOKEN_{i}")}))
        .collect();
    let mut builder = Broker::builder()
        .top("auth", json!({ "tokens": tokens }))
        .server(server);
    for (i, name) in names.iter().enumerate() {
        builder = builder.env(&format!("TOKEN_{i}"), &token(name));
    }
    let broker = builder.start().await;
    broker.wait_ready().await;
    broker
}

fn token(name: &str) -> String {
    format!("token-{name}")
}

/// What a streaming call saw besides its progress, and its result. Whatever it is asked it
/// answers with a secret of its own, as a naive (or hostile) client would.
async fn read_to_the_end(mut stream: StreamCall, secret: &str) -> (Vec<String>, String) {
    let mut seen = Vec::new();
    loop {
        match stream.next().await.expect("the stream goes on") {
            Some(Event::Progress(_)) => {}
            Some(Event::Elicitation(asked)) => {
                seen.push(format!("asked: {}", asked.message));
                let answer = json!({ "answer": secret });
                stream
                    .answer_elicitation(&asked.id, "accept", Some(answer))
                    .await;
            }
            Some(Event::Log(log)) => seen.push(format!("log: {}", log.data_json)),
            Some(Event::Result(result)) => return (seen, result.text),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn what_a_shared_server_asks_and_logs_during_one_callers_prompt_reaches_no_other_caller() {
    let server = interactive("py").prefix("py_").args(["--asking-prompt"]);
    let broker = broker(&["alice", "bob"], server).await;
    // Alice's streaming call is the only call in flight on the shared stdio session.
    let mut alice = broker
        .stream_call(
            Some(&token("alice")),
            "py_slow",
            r#"{"seconds": 2.5, "every": 0.5}"#,
        )
        .await
        .unwrap();
    let first = alice.next().await.unwrap();
    assert!(matches!(first, Some(Event::Progress(_))), "{first:?}");

    // Bob gets the prompt that logs and asks while it is being got.
    let request = proto::GetPromptRequest {
        name: "py_interview".into(),
        arguments: [("topic".to_owned(), "bob's merger".to_owned())].into(),
    };
    let request = common::as_caller(Some(&token("bob")), &[], request);
    let mut client = broker.client.clone();
    let bob = async {
        let response = tokio::time::timeout(WAIT, client.get_prompt(request)).await;
        format!("{:?}", response.expect("answered in time").unwrap())
    };
    let (bob, (alice_saw, alice_result)) =
        tokio::join!(bob, read_to_the_end(alice, "alice's secret"));

    assert!(
        alice_saw.is_empty(),
        "alice saw what was bob's: {alice_saw:?}"
    );
    assert_eq!(alice_result, "slept 2.5s");
    assert!(
        bob.contains("interview about bob's merger: declined"),
        "bob's question was declined, not answered by another: {bob}"
    );
    assert!(!bob.contains("alice"), "{bob}");
}

/// The demo, one process per caller and value of its `x-rot` header (it is in the command line).
fn rotating_demo() -> Server {
    demo("demo")
        .set("isolation", "per-caller")
        .args(["--tag", "${caller.header.x-rot}"])
        .set("discovery", json!({"headers": {"x-rot": "discovery"}}))
}

/// The broker's child processes still running (the discovery session's among them).
fn processes(broker: &Broker) -> usize {
    let children = common::children(broker.pid());
    children
        .into_iter()
        .filter(|pid| common::alive(*pid))
        .count()
}

/// `sleep` for `ms` as `caller` with `x-rot: rot`, running in the background.
fn sleeping(
    broker: &Broker,
    caller: &str,
    rot: &str,
    ms: u64,
) -> JoinHandle<Result<proto::CallToolResponse, Status>> {
    let request = common::as_caller(
        Some(&token(caller)),
        &[("x-rot", rot)],
        common::sleep_request(ms),
    );
    let mut client = broker.client.clone();
    tokio::spawn(async move { Ok(client.call_tool(request).await?.into_inner()) })
}

/// Starts slow calls as `caller`, a new `x-rot` value each; waits for each to be running. The
/// ones refused come back at once, with their statuses.
async fn rotate_slow_calls(
    broker: &Broker,
    caller: &str,
    values: &[&str],
) -> (
    Vec<JoinHandle<Result<proto::CallToolResponse, Status>>>,
    Vec<Status>,
) {
    let (mut running, mut refused) = (Vec::new(), Vec::new());
    for value in values {
        let mut call = sleeping(broker, caller, value, 2500);
        let started = running.len() + 1;
        let is_running = broker.wait_for_logs(
            "sleep started",
            started,
            common::stderr_says("sleep started"),
        );
        tokio::select! {
            () = is_running => running.push(call),
            done = &mut call => refused.push(done.unwrap().expect_err("refused")),
        }
    }
    (running, refused)
}

#[tokio::test]
async fn a_caller_rotating_a_header_cannot_start_a_process_per_call() {
    let broker = broker(&["mallory", "alice"], rotating_demo()).await;
    let values = ["v1", "v2", "v3", "v4", "v5", "v6"];
    let (running, refused) = rotate_slow_calls(&broker, "mallory", &values).await;
    // Its current session and one finishing its call: max_sessions_per_caller (2).
    assert_eq!((running.len(), refused.len()), (2, 4), "{refused:?}");
    for status in &refused {
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert!(
            status.message().contains("max_sessions_per_caller"),
            "{status:?}"
        );
    }
    assert!(processes(&broker) <= 3, "discovery + mallory's two");
    // Another caller is not held by mallory's limit.
    let alice = broker
        .call_as(Some(&token("alice")), &[("x-rot", "a")], "whoami", "{}")
        .await;
    assert!(alice.is_ok(), "{alice:?}");
    for call in running {
        assert!(call.await.unwrap().is_ok());
    }

    // Quick calls, a new value each: each replaces an idle process, never more of them.
    for value in ["q1", "q2", "q3", "q4", "q5"] {
        let answer = broker
            .call_as(Some(&token("mallory")), &[("x-rot", value)], "whoami", "{}")
            .await;
        assert!(answer.is_ok(), "{answer:?}");
        assert!(
            processes(&broker) <= 4,
            "discovery, alice and mallory's two"
        );
    }
}

#[tokio::test]
async fn max_sessions_counts_the_sessions_that_still_finish_their_calls() {
    let server = rotating_demo()
        .set("max_sessions", 2)
        .set("max_sessions_per_caller", 10);
    let broker = broker(&["mallory", "alice"], server).await;
    let (running, refused) = rotate_slow_calls(&broker, "mallory", &["v1", "v2", "v3"]).await;
    assert_eq!((running.len(), refused.len()), (2, 1), "{refused:?}");
    let alice = broker
        .call_as(Some(&token("alice")), &[("x-rot", "a")], "whoami", "{}")
        .await;
    for status in refused.iter().chain(alice.as_ref().err()) {
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert!(status.message().contains("(max_sessions)"), "{status:?}");
    }
    assert!(alice.is_err(), "all sessions busy, draining ones included");
    assert!(processes(&broker) <= 3, "discovery + two");
    for call in running {
        assert!(call.await.unwrap().is_ok());
    }
}

#[tokio::test]
async fn one_callers_slow_calls_do_not_hold_anothers_on_a_per_caller_server() {
    let server = demo("demo")
        .set("isolation", "per-caller")
        .set("max_concurrent_calls", 1)
        .set("max_queued_calls", 0);
    let broker = broker(&["alice", "bob"], server).await;
    let slow = sleeping(&broker, "alice", "-", 3000);
    broker
        .wait_for_logs("sleep started", 1, common::stderr_says("sleep started"))
        .await;
    // Alice's own slot is taken, and her queue holds none.
    let more = broker
        .call_as(Some(&token("alice")), &[], "whoami", "{}")
        .await
        .unwrap_err();
    assert_eq!(more.code(), Code::ResourceExhausted, "{more:?}");
    assert!(more.message().contains("max_concurrent_calls"), "{more:?}");
    // Bob's call is served at once, while alice's still runs.
    let bob = broker
        .call_as(Some(&token("bob")), &[], "whoami", "{}")
        .await;
    assert!(bob.is_ok(), "{bob:?}");
    assert!(!slow.is_finished(), "alice's call still runs");
    assert!(slow.await.unwrap().is_ok());
}
