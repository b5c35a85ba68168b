//! Supervision: dead sessions fail their calls at once and come back; failing servers are
//! retried with backoff; callers that give up cancel the call on the server; and no process
//! outlives the broker, however it ends.

use std::time::{Duration, Instant, SystemTime};

use crate::common::{
    Broker, WAIT, alive, children, command, demo, demo_after, sleep_request, stderr_says, wait_gone,
};
use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use tonic::Code;
use toolbroker::proto::{ServerState, ServerStatus};

/// Waits until the demo's stderr (in the broker's log) shows a line containing `text`.
async fn demo_logged(broker: &Broker, text: &str) {
    broker.wait_for_log(text, stderr_says(text)).await;
}

/// When the broker says the server entered the state of `status`.
fn since(status: &ServerStatus) -> SystemTime {
    let since = status.since.expect("a status says since when");
    SystemTime::try_from(since).expect("a valid timestamp")
}

#[tokio::test]
async fn a_killed_child_fails_its_calls_at_once_and_comes_back_ready() {
    // Neither the sleep nor the server's timeout ends within the test's WAIT: an answer within
    // it is the broker noticing the death, not waiting for the call.
    let broker = Broker::builder()
        .server(demo("demo").set("timeout", "10m"))
        .start()
        .await;
    broker.wait_ready().await;
    let mut client = broker.client.clone();
    let in_flight = tokio::spawn(async move { client.call_tool(sleep_request(600_000)).await });
    demo_logged(&broker, "sleep started").await;

    let killed = Instant::now();
    let child = broker.kill_child();
    let status = tokio::time::timeout(WAIT, in_flight)
        .await
        .expect("the lost call is answered well before the sleep or its timeout would end")
        .unwrap()
        .unwrap_err();
    let to_unavailable = killed.elapsed();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");

    let back = broker
        .wait_for_status("demo", "READY again", |s| {
            s.state() == ServerState::Ready && s.restarts == 1
        })
        .await;
    let to_ready = killed.elapsed();
    assert!(back.since.is_some());
    assert_eq!(broker.text("echo", r#"{"message": "back"}"#).await, "back");
    assert!(!alive(child));
    // Figures for the record (the closing note quotes them), as seen by this test.
    eprintln!(
        "FIGURE child death to UNAVAILABLE: {to_unavailable:?}; to READY again: {to_ready:?}"
    );
}

#[tokio::test]
async fn text_on_stdout_that_is_not_json_rpc_fails_the_session_with_a_quote() {
    let broker = Broker::builder()
        .server(demo_after("chatty", "echo Starting the server..."))
        .server(demo("demo"))
        .start()
        .await;
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
    let flaky = command("flaky", "sh", &["-c", "exit 7"])
        .set("backoff_initial", "100ms")
        .set("backoff_max", "800ms");
    let broker = Broker::builder()
        .server(flaky)
        .server(demo("demo"))
        .start()
        .await;
    let mut watch = broker.watch(&["flaky"]).await;
    // Each FAILED status announces the delay before the next attempt, whose RECONNECTING status
    // counts one more restart. Both are stamped by the broker (`since`), so their distance is
    // the delay it kept, however late this test reads them.
    let mut failures: Vec<(u32, Duration, SystemTime)> = Vec::new();
    let mut attempts: Vec<(u32, SystemTime)> = Vec::new();
    while failures.last().is_none_or(|(restarts, _, _)| *restarts < 5) {
        let status = watch.next_status().await;
        match status.state() {
            ServerState::Failed => {
                let delay = status.message.rsplit("next attempt in ").next().unwrap();
                let delay =
                    humantime::parse_duration(delay).unwrap_or_else(|e| panic!("{delay:?}: {e}"));
                failures.push((status.restarts, delay, since(&status)));
            }
            ServerState::Reconnecting => attempts.push((status.restarts, since(&status))),
            _ => {}
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
    }
    for (restarts, announced, failed) in &failures[..failures.len() - 1] {
        let (_, attempt) = attempts
            .iter()
            .find(|(r, _)| *r == restarts + 1)
            .unwrap_or_else(|| panic!("no attempt {} seen: {attempts:?}", restarts + 1));
        let waited = attempt
            .duration_since(*failed)
            .expect("the attempt came later");
        assert!(
            waited >= *announced,
            "attempt {}: waited {waited:?}, announced {announced:?}",
            restarts + 1
        );
    }
    // The other server never noticed.
    assert_eq!(broker.server("demo").await.state(), ServerState::Ready);
    assert_eq!(broker.text("echo", r#"{"message": "fine"}"#).await, "fine");
}

#[tokio::test]
async fn a_caller_that_gives_up_cancels_the_call_on_the_server() {
    let broker = Broker::builder().server(demo("demo")).start().await;
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
    let broker = Broker::builder()
        .top("shutdown_grace", "10s")
        .server(demo("demo"))
        .start()
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
    let broker = Broker::builder()
        .server(demo("a").prefix("a_"))
        .server(demo("b").prefix("b_"))
        .start()
        .await;
    broker.wait_ready().await;
    let servers = children(broker.pid());
    assert_eq!(servers.len(), 2);
    kill(Pid::from_raw(broker.pid() as i32), Signal::SIGKILL).unwrap();
    for pid in servers {
        wait_gone(pid).await;
    }
}

#[tokio::test]
async fn watchers_that_go_away_are_cleaned_up() {
    let broker = Broker::builder().server(demo("demo")).start().await;
    broker.wait_ready().await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(broker.watch(&[]).await);
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
