//! CallToolStream against real servers: progress that keeps a long call alive (up to
//! `max_timeout`), elicitation and sampling relayed to the caller whose call it is and answered
//! back, unary calls and half-closed streams that decline at once, and `roots`.

use std::time::{Duration, Instant};

use crate::common::{self, Broker, WAIT, demo, everything, interactive, stream::StreamCall};
use serde_json::json;
use tonic::Code;
use toolbroker::proto::{
    self, call_tool_stream_request::Message, call_tool_stream_response::Event,
};

async fn broker_of(servers: Vec<common::Server>) -> Broker {
    let broker = Broker::builder().servers(servers).start().await;
    broker.wait_ready().await;
    broker
}

/// The next event, which must be an elicitation: its id and message.
async fn elicitation(stream: &mut StreamCall) -> proto::ElicitationRequest {
    loop {
        match stream.next().await.expect("the stream goes on") {
            Some(Event::Elicitation(request)) => return request,
            Some(Event::Progress(_)) => {}
            other => panic!("expected an elicitation, got {other:?}"),
        }
    }
}

/// The next event, which must be a sampling request.
async fn sampling(stream: &mut StreamCall) -> proto::SamplingRequest {
    match stream.next().await.expect("the stream goes on") {
        Some(Event::Sampling(request)) => request,
        other => panic!("expected a sampling request, got {other:?}"),
    }
}

#[tokio::test]
async fn progress_restarts_the_timeout_until_max_timeout() {
    let broker = broker_of(vec![
        interactive("py").prefix("py_").set("timeout", "1s"),
        interactive("capped")
            .prefix("capped_")
            .set("timeout", "1s")
            .set("max_timeout", "2s"),
    ])
    .await;
    let slow = r#"{"seconds": 3, "every": 0.4}"#;

    let mut stream = broker.stream_call(None, "py_slow", slow).await.unwrap();
    let (progress, result) = stream.result().await.expect("kept alive by progress");
    assert_eq!(result.text, "slept 3.0s", "{result:?}");
    assert!(progress.len() >= 7, "a step every 0.4 s: {progress:?}");
    let values: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "in order: {values:?}"
    );
    assert_eq!(progress[0].total, Some(8.0));
    assert_eq!(progress[0].message, "step 1 of 8");

    let started = Instant::now();
    let mut capped = broker.stream_call(None, "capped_slow", slow).await.unwrap();
    let status = capped.result().await.expect_err("stopped by max_timeout");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(3),
        "{took:?}"
    );

    // A unary call has no stream to show progress on: its timeout stands.
    let unary = broker.call("py_slow", slow).await.unwrap_err();
    assert_eq!(unary.code(), Code::DeadlineExceeded, "{unary:?}");
}

#[tokio::test]
async fn an_elicitation_reaches_the_caller_and_its_answer_the_server() {
    let broker = broker_of(vec![demo("demo"), interactive("py").prefix("py_")]).await;

    let mut stream = broker
        .stream_call(None, "ask", r#"{"question": "Which colour?"}"#)
        .await
        .unwrap();
    let asked = elicitation(&mut stream).await;
    assert_eq!(
        (asked.message.as_str(), asked.mode.as_str()),
        ("Which colour?", "form")
    );
    let schema: serde_json::Value = serde_json::from_str(&asked.requested_schema_json).unwrap();
    assert_eq!(schema["required"], json!(["answer"]), "{schema}");
    stream
        .answer_elicitation(&asked.id, "accept", Some(json!({"answer": "blue"})))
        .await;
    let (_, result) = stream.result().await.unwrap();
    assert_eq!(result.text, "the user answered: blue");

    let mut stream = broker
        .stream_call(None, "py_ask", r#"{"question": "Proceed?"}"#)
        .await
        .unwrap();
    let asked = elicitation(&mut stream).await;
    assert_eq!(asked.message, "Proceed?");
    stream.answer_elicitation(&asked.id, "decline", None).await;
    let (_, result) = stream.result().await.unwrap();
    assert_eq!(result.text, "declined");
}

#[tokio::test]
async fn a_url_elicitation_keeps_the_servers_own_id() {
    let broker = broker_of(vec![interactive("py").prefix("py_")]).await;
    let url = "https://example.com/consent";
    let mut stream = broker
        .stream_call(None, "py_visit", &json!({ "url": url }).to_string())
        .await
        .unwrap();
    let asked = elicitation(&mut stream).await;
    assert_eq!(
        (
            asked.mode.as_str(),
            asked.url.as_str(),
            asked.message.as_str()
        ),
        ("url", url, "please visit")
    );
    assert_eq!(asked.elicitation_id, format!("visit-{}", url.len()));
    assert_ne!(
        asked.id, asked.elicitation_id,
        "the broker's own id is apart"
    );
    stream.answer_elicitation(&asked.id, "accept", None).await;
    let (_, result) = stream.result().await.unwrap();
    assert_eq!(result.text, "visit: accept");
}

#[tokio::test]
async fn sampling_is_relayed_and_answered_or_refused() {
    let broker = broker_of(vec![interactive("py").prefix("py_")]).await;
    let mut stream = broker
        .stream_call(None, "py_sample", r#"{"prompt": "Say hi"}"#)
        .await
        .unwrap();
    let request = sampling(&mut stream).await;
    let params: serde_json::Value = serde_json::from_str(&request.params_json).unwrap();
    assert_eq!(
        params["messages"][0]["content"]["text"], "Say hi",
        "{params}"
    );
    assert_eq!(params["maxTokens"], 50);
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "hi!"},
        "model": "test-model", "stopReason": "endTurn"});
    stream.answer_sampling(&request.id, Ok(answer)).await;
    let (_, result) = stream.result().await.unwrap();
    assert_eq!(result.text, "model said: hi!");

    let mut refused = broker
        .stream_call(None, "py_sample", r#"{"prompt": "Say hi"}"#)
        .await
        .unwrap();
    let request = sampling(&mut refused).await;
    refused
        .answer_sampling(&request.id, Err("the user said no"))
        .await;
    let (_, result) = refused.result().await.unwrap();
    assert!(
        result.is_error && result.text.contains("the user said no"),
        "{result:?}"
    );
}

#[tokio::test]
async fn unary_calls_and_half_closed_streams_decline_at_once() {
    let broker = broker_of(vec![demo("demo"), interactive("py").prefix("py_")]).await;
    let started = Instant::now();
    // The demo server speaks 2026-07-28: a unary call's request declares no elicitation, so
    // it is not asked at all.
    let unasked = broker.call("ask", r#"{"question": "?"}"#).await.unwrap();
    assert!(
        unasked.is_error && unasked.text.contains("did not declare elicitation"),
        "{unasked:?}"
    );
    let refused = broker
        .call("py_sample", r#"{"prompt": "x"}"#)
        .await
        .unwrap();
    assert!(
        refused.is_error && refused.text.starts_with("sampling failed"),
        "{refused:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "prompt: {:?}",
        started.elapsed()
    );

    let mut stream = broker
        .stream_call_half_closed("py_ask", r#"{"question": "?"}"#)
        .await
        .unwrap();
    let (_, result) = stream.result().await.unwrap();
    assert_eq!(result.text, "declined");
}

/// Two callers each run an eliciting call at once; what each was asked (`None`: declined).
/// With `overlap`, neither answers before both were asked, so both calls are surely in flight
/// when the second request comes.
pub(crate) async fn two_callers_ask(
    broker: &Broker,
    tool: &str,
    overlap: bool,
) -> Vec<Option<String>> {
    let both_asked = tokio::sync::Barrier::new(2);
    let ask = |token: &'static str| {
        let broker = &broker;
        let both_asked = &both_asked;
        async move {
            let arguments = json!({"question": format!("question for {token}")}).to_string();
            let mut stream = broker
                .stream_call(Some(token), tool, &arguments)
                .await
                .unwrap();
            loop {
                match stream.next().await.unwrap() {
                    Some(Event::Elicitation(asked)) => {
                        if overlap {
                            tokio::time::timeout(WAIT, both_asked.wait())
                                .await
                                .expect("the other caller was asked too");
                        }
                        stream
                            .answer_elicitation(&asked.id, "accept", Some(json!({"answer": token})))
                            .await;
                        let (_, result) = stream.result().await.unwrap();
                        assert_eq!(result.text, format!("accepted: {token}"));
                        return Some(asked.message);
                    }
                    Some(Event::Result(result)) => {
                        assert_eq!(result.text, "declined", "{result:?}");
                        return None;
                    }
                    Some(Event::Progress(_)) => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
    };
    let (alice, bob) = tokio::join!(ask("alice"), ask("bob"));
    vec![alice, bob]
}

fn tokens() -> serde_json::Value {
    json!({"tokens": [
        {"name": "alice", "value_env": "ALICE_TOKEN"},
        {"name": "bob", "value_env": "BOB_TOKEN"},
    ]})
}

pub(crate) async fn broker_with_callers(server: common::Server) -> Broker {
    let broker = Broker::builder()
        .top("auth", tokens())
        .env("ALICE_TOKEN", "alice")
        .env("BOB_TOKEN", "bob")
        .server(server)
        .start()
        .await;
    broker.wait_ready().await;
    broker
}

#[tokio::test]
async fn concurrent_callers_never_see_each_others_requests() {
    // Per-caller sessions: each caller's request is its own.
    let per_caller = broker_with_callers(
        interactive("py")
            .prefix("py_")
            .set("isolation", "per-caller"),
    )
    .await;
    let seen = two_callers_ask(&per_caller, "py_ask", true).await;
    assert_eq!(
        seen,
        [
            Some("question for alice".into()),
            Some("question for bob".into())
        ]
    );

    // One shared stdio session with both calls in flight: a request cannot be tied to one
    // caller, so it is declined rather than shown to the wrong one. (If the calls happen not to
    // overlap, each may see its own, but never the other's.)
    let shared = broker_with_callers(interactive("py").prefix("py_")).await;
    let seen = two_callers_ask(&shared, "py_ask", false).await;
    for (asked, caller) in seen.iter().zip(["alice", "bob"]) {
        if let Some(message) = asked {
            assert_eq!(message, &format!("question for {caller}"));
        }
    }
}

#[tokio::test]
async fn over_streamable_http_each_request_reaches_the_call_it_came_with() {
    // One shared HTTP session: each elicitation arrives on its own call's answer stream, so
    // both callers are asked, each its own question, while both calls are in flight.
    let server = common::python::InteractiveHttpServer::start().await;
    let broker = broker_with_callers(common::url_server("py", &server.url).prefix("py_")).await;
    let seen = two_callers_ask(&broker, "py_ask", true).await;
    assert_eq!(
        seen,
        [
            Some("question for alice".into()),
            Some("question for bob".into())
        ]
    );
    let mut stream = broker
        .stream_call(
            Some("alice"),
            "py_slow",
            r#"{"seconds": 1.2, "every": 0.4}"#,
        )
        .await
        .unwrap();
    let (progress, result) = stream.result().await.unwrap();
    assert_eq!((progress.len(), result.text.as_str()), (3, "slept 1.2s"));
}

#[tokio::test]
async fn server_everything_progress_elicitation_and_sampling() {
    let broker = broker_of(vec![everything("everything").prefix("ev_")]).await;
    // Its eliciting and sampling tools appear once it sees the broker's capabilities.
    common::poll("the sampling tool", Duration::from_millis(100), || async {
        let tools = broker.tools().await.tools;
        tools
            .iter()
            .any(|t| t.name == "ev_trigger-sampling-request")
            .then_some(())
    })
    .await;

    let mut stream = broker
        .stream_call(
            None,
            "ev_trigger-long-running-operation",
            r#"{"duration": 1, "steps": 4}"#,
        )
        .await
        .unwrap();
    let (progress, result) = stream.result().await.unwrap();
    assert_eq!(progress.len(), 4, "{progress:?}");
    assert_eq!(progress[3].total, Some(4.0));
    assert!(
        result.text.contains("Long running operation completed"),
        "{result:?}"
    );

    let mut stream = broker
        .stream_call(None, "ev_trigger-elicitation-request", "{}")
        .await
        .unwrap();
    let asked = elicitation(&mut stream).await;
    assert!(
        asked.requested_schema_json.contains("\"name\""),
        "{asked:?}"
    );
    stream
        .answer_elicitation(&asked.id, "accept", Some(json!({"name": "Ada"})))
        .await;
    let (_, result) = stream.result().await.unwrap();
    assert!(result.text.contains("Ada"), "{result:?}");

    let mut stream = broker
        .stream_call(None, "ev_trigger-sampling-request", r#"{"prompt": "ping"}"#)
        .await
        .unwrap();
    let request = sampling(&mut stream).await;
    assert!(request.params_json.contains("ping"), "{request:?}");
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "pong"},
        "model": "m"});
    stream.answer_sampling(&request.id, Ok(answer)).await;
    let (_, result) = stream.result().await.unwrap();
    assert!(result.text.contains("pong"), "{result:?}");
}

#[tokio::test]
async fn a_cancelled_stream_cancels_the_call_on_the_server() {
    let broker = broker_of(vec![demo("demo")]).await;
    let mut stream = broker
        .stream_call(None, "sleep", r#"{"ms": 30000, "steps": 300}"#)
        .await
        .unwrap();
    // Progress shows the call runs; then the client goes away.
    assert!(matches!(
        stream.next().await.unwrap(),
        Some(Event::Progress(_))
    ));
    drop(stream);
    broker
        .wait_for_log("the demo server's cancellation", |line| {
            line["message"]
                .as_str()
                .is_some_and(|m| m.contains("sleep cancelled"))
        })
        .await;
}

#[tokio::test]
async fn the_first_message_must_be_the_call_and_refusals_come_as_statuses() {
    let broker = broker_of(vec![demo("demo")]).await;
    let unknown = broker.stream_call(None, "nope", "{}").await;
    let status = match unknown {
        Err(status) => status,
        Ok(mut stream) => stream.result().await.unwrap_err(),
    };
    assert_eq!(status.code(), Code::NotFound, "{status:?}");

    let (sender, receiver) = tokio::sync::mpsc::channel(1);
    sender
        .send(proto::CallToolStreamRequest {
            message: Some(Message::SamplingResponse(proto::SamplingResponse::default())),
        })
        .await
        .unwrap();
    let request = tokio_stream::wrappers::ReceiverStream::new(receiver);
    let status = broker
        .client
        .clone()
        .call_tool_stream(request)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("first message"), "{status:?}");
}

#[tokio::test]
async fn roots_are_answered_to_roots_list() {
    let broker = broker_of(vec![
        interactive("py")
            .prefix("py_")
            .set("roots", json!(["file:///srv/data", "file:///tmp/work"])),
    ])
    .await;
    let roots = broker.text("py_roots", "{}").await;
    let roots: Vec<String> = serde_json::from_str(&roots).unwrap();
    assert_eq!(roots, ["file:///srv/data", "file:///tmp/work"]);
}

#[tokio::test]
async fn log_messages_of_the_call_are_streamed_before_its_result() {
    let broker = broker_of(vec![interactive("py").prefix("py_")]).await;
    let mut stream = broker
        .stream_call(None, "py_chatty", r#"{"count": 4}"#)
        .await
        .unwrap();
    let mut logs = Vec::new();
    let result = loop {
        match stream.next().await.unwrap() {
            Some(Event::Log(log)) => logs.push(log),
            Some(Event::Result(result)) => break result,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(result.text, "logged 4");
    let seen: Vec<(&str, &str, &str)> = logs
        .iter()
        .map(|l| (l.level.as_str(), l.logger.as_str(), l.data_json.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("debug", "chatty", r#""line 1""#),
            ("info", "chatty", r#""line 2""#),
            ("warning", "chatty", r#""line 3""#),
            ("debug", "chatty", r#""line 4""#),
        ]
    );
}
