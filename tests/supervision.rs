//! Supervision: dead sessions fail their calls at once and come back; failing servers are
//! retried with backoff; callers that give up cancel the call on the server; and no process
//! outlives the broker, however it ends.

mod common;

use std::time::{Duration, Instant};

use common::{Broker, WAIT, alive, children, demo_server, sleep_request, toolbroker_bin};
use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use tonic::Code;
use toolbroker::proto::{self, ServerState, watch_event::Event};

/// Waits until the demo's stderr (in the broker's log) shows a line containing `text`.
async fn demo_logged(broker: &Broker, text: &str) {
    broker
        .wait_for_log(text, |l| {
            l["target"] == "toolbroker::stderr"
                && l["message"].as_str().is_some_and(|m| m.contains(text))
        })
        .await;
}

#[tokio::test]
async fn a_killed_child_fails_its_calls_at_once_and_comes_back_ready() {
    let broker = Broker::start(&format!("servers:\n{}", demo_server("demo", ""))).await;
    broker.wait_ready().await;
    let mut client = broker.client.clone();
    let in_flight = tokio::spawn(async move { client.call_tool(sleep_request(20_000)).await });
    demo_logged(&broker, "sleep started").await;

    let killed = Instant::now();
    let child = broker.kill_child();
    let status = tokio::time::timeout(WAIT, in_flight)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    let to_unavailable = killed.elapsed();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        to_unavailable < Duration::from_secs(1),
        "UNAVAILABLE after {to_unavailable:?}"
    );

    let back = broker
        .wait_for_status("demo", "READY again", |s| {
            s.state() == ServerState::Ready && s.restarts == 1
        })
        .await;
    let to_ready = killed.elapsed();
    assert!(back.since.is_some());
    assert_eq!(broker.text("echo", r#"{"message": "back"}"#).await, "back");
    assert!(!alive(child));
    // Figures for the record (the closing note quotes them).
    eprintln!(
        "FIGURE child death to UNAVAILABLE: {to_unavailable:?}; to READY again: {to_ready:?}"
    );
}

#[tokio::test]
async fn text_on_stdout_that_is_not_json_rpc_fails_the_session_with_a_quote() {
    let config = format!(
        "servers:\n  - name: chatty\n    command: sh\n    args: [-c, 'echo Starting the server...; exec \"$0\" demo-server', {bin:?}]\n{}",
        demo_server("demo", ""),
        bin = toolbroker_bin()
    );
    let broker = Broker::start(&config).await;
    broker.wait_ready().await;
    let chatty = broker.wait_for_state("chatty", ServerState::Failed).await;
    assert!(
        chatty.message.contains("not JSON-RPC") && chatty.message.contains("Starting the server"),
        "{}",
        chatty.message
    );
    assert_eq!(broker.server("demo").await.state(), ServerState::Ready);
}

#[tokio::test]
async fn a_server_that_keeps_failing_is_retried_with_growing_delays() {
    let config = format!(
        "servers:\n  - name: flaky\n    command: sh\n    args: [-c, 'exit 7']\n    backoff_initial: 100ms\n    backoff_max: 800ms\n{}",
        demo_server("demo", "")
    );
    let broker = Broker::start(&config).await;
    let request = proto::WatchRequest {
        servers: vec!["flaky".into()],
    };
    let mut stream = broker
        .client
        .clone()
        .watch(request)
        .await
        .unwrap()
        .into_inner();
    // Each FAILED status announces the delay before the next attempt.
    let mut failures: Vec<(u32, Duration, Instant)> = Vec::new();
    while failures.last().is_none_or(|(restarts, _, _)| *restarts < 5) {
        let event = tokio::time::timeout(WAIT, stream.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let statuses = match event.event {
            Some(Event::Snapshot(snapshot)) => snapshot.servers,
            Some(Event::ServerStatus(status)) => vec![status],
            _ => continue,
        };
        for status in statuses
            .into_iter()
            .filter(|s| s.state() == ServerState::Failed)
        {
            let delay = status.message.rsplit("next attempt in ").next().unwrap();
            let delay =
                humantime::parse_duration(delay).unwrap_or_else(|e| panic!("{delay:?}: {e}"));
            failures.push((status.restarts, delay, Instant::now()));
        }
    }
    for (restarts, delay, _) in &failures {
        let ceiling = Duration::from_millis(100 << restarts).min(Duration::from_millis(800));
        assert!(
            *delay >= ceiling / 2 && *delay <= ceiling,
            "attempt {restarts}: {delay:?} not within [{:?}, {ceiling:?}]",
            ceiling / 2
        );
    }
    for pair in failures.windows(2) {
        assert_eq!(pair[1].0, pair[0].0 + 1, "one restart per attempt");
        // Seen by this test, not stamped by the broker: allow for the test's own lateness.
        let waited = pair[1].2 - pair[0].2 + Duration::from_millis(50);
        assert!(
            waited >= pair[0].1,
            "waited {waited:?}, announced {:?}",
            pair[0].1
        );
    }
    // The other server never noticed.
    assert_eq!(broker.server("demo").await.state(), ServerState::Ready);
    assert_eq!(broker.text("echo", r#"{"message": "fine"}"#).await, "fine");
}

#[tokio::test]
async fn a_caller_that_gives_up_cancels_the_call_on_the_server() {
    let broker = Broker::start(&format!("servers:\n{}", demo_server("demo", ""))).await;
    broker.wait_ready().await;

    // Its deadline passes: the broker answers DEADLINE_EXCEEDED (or the client does) and the
    // server is sent notifications/cancelled.
    let mut request = tonic::Request::new(sleep_request(10_000));
    request.set_timeout(Duration::from_millis(300));
    let status = broker.client.clone().call_tool(request).await.unwrap_err();
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    demo_logged(&broker, "request cancelled").await;

    // It goes away without a deadline: dropping the call cancels it too.
    let mut client = broker.client.clone();
    let call = tokio::spawn(async move { client.call_tool(sleep_request(10_000)).await });
    let stderr_says = |text: &'static str| {
        move |l: &serde_json::Value| {
            l["target"] == "toolbroker::stderr"
                && l["message"].as_str().is_some_and(|m| m.contains(text))
        }
    };
    broker
        .wait_for_logs("a second sleep", 2, stderr_says("sleep started"))
        .await;
    call.abort();
    broker
        .wait_for_logs("a second cancellation", 2, stderr_says("sleep cancelled"))
        .await;
}

#[tokio::test]
async fn sigterm_lets_calls_in_flight_finish_and_refuses_new_ones() {
    let broker = Broker::start(&format!(
        "shutdown_grace: 10s\nservers:\n{}",
        demo_server("demo", "")
    ))
    .await;
    broker.wait_ready().await;
    let mut client = broker.client.clone();
    let in_flight = tokio::spawn(async move { client.call_tool(sleep_request(1500)).await });
    demo_logged(&broker, "sleep started").await;
    kill(Pid::from_raw(broker.pid() as i32), Signal::SIGTERM).unwrap();
    broker
        .wait_for_log("the shutdown", |l| l["message"] == "shutting down")
        .await;

    let late = broker
        .call("echo", r#"{"message": "too late"}"#)
        .await
        .unwrap_err();
    assert_eq!(late.code(), Code::Unavailable, "{late:?}");
    let finished = tokio::time::timeout(WAIT, in_flight)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(finished.unwrap().into_inner().text, "slept 1500 ms");
    let status = broker.terminate().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn a_sigkilled_broker_leaves_no_child_alive() {
    let config = format!(
        "servers:\n{}{}",
        demo_server("a", "    prefix: a_\n"),
        demo_server("b", "    prefix: b_\n")
    );
    let broker = Broker::start(&config).await;
    broker.wait_ready().await;
    let servers = children(broker.pid());
    assert_eq!(servers.len(), 2);
    kill(Pid::from_raw(broker.pid() as i32), Signal::SIGKILL).unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(2), async {
        // Nothing to wait on for processes that are not ours: poll their state briefly.
        while servers.iter().any(|pid| alive(*pid)) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "children still alive 2 s after the broker was killed"
    );
}

#[tokio::test]
async fn watchers_that_go_away_are_cleaned_up() {
    let broker = Broker::start(&format!("servers:\n{}", demo_server("demo", ""))).await;
    broker.wait_ready().await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        let stream = broker
            .client
            .clone()
            .watch(proto::WatchRequest::default())
            .await
            .unwrap()
            .into_inner();
        streams.push(stream);
    }
    broker
        .wait_for_log("three watchers", |l| {
            l["message"] == "a watcher joined" && l["watchers"] == 3
        })
        .await;
    drop(streams);
    broker
        .wait_for_log("none left", |l| {
            l["message"] == "a watcher left" && l["watchers"] == 0
        })
        .await;
}
