//! One caller never reaches another through an upstream server, played by a hostile caller
//! over real processes: what a shared stdio server asks and logs during one caller's
//! `prompts/get` never reaches another caller's streaming call (nor does that caller's answer
//! come back as the first one's result).

mod common;

use common::{Broker, Server, WAIT, interactive, stream::StreamCall};
use serde_json::json;
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
