//! `replicas: N`: a stdio server runs as N processes, its tools are listed once, calls go to the
//! least busy replica, and a replica that dies comes back while the others serve.

mod common;

use std::time::{Duration, Instant};

use common::{
    Broker, WAIT, alive, children, demo_server, demo_server_with_args, names, sleep_request,
};
use tonic::{Code, Streaming};
use toolbroker::proto::{self, ServerState, watch_event::Event};

/// Starts a broker with one server `demo` whose entry ends with `extra`, and waits until all
/// `replicas` of it are ready.
async fn broker_with(args: &[&str], replicas: usize, extra: &str) -> Broker {
    let extra = format!("    replicas: {replicas}\n{extra}");
    let broker = Broker::start(&format!(
        "servers:\n{}",
        demo_server_with_args("demo", args, &extra)
    ))
    .await;
    // One replica shows its own condition, as a server without replicas does.
    let all = format!("{replicas} of {replicas} replicas ready");
    broker
        .wait_for_status("demo", &all, |s| {
            s.state() == ServerState::Ready && (replicas == 1 || s.message.starts_with(&all))
        })
        .await;
    broker
}

/// Sends `count` sleep calls at once and returns how long the last took to answer.
async fn sleep_together(broker: &Broker, count: usize, ms: u64) -> Duration {
    let started = Instant::now();
    let calls = (0..count).map(|_| {
        let mut client = broker.client.clone();
        async move { client.call_tool(sleep_request(ms)).await }
    });
    let answers = tokio::time::timeout(WAIT, futures::future::join_all(calls))
        .await
        .expect("the calls answered in time");
    for answer in answers {
        let answer = answer.expect("sleep").into_inner();
        assert!(!answer.is_error, "{answer:?}");
    }
    started.elapsed()
}

/// The next status of the watched server, skipping tool events.
async fn next_status(stream: &mut Streaming<proto::WatchEvent>) -> proto::ServerStatus {
    loop {
        let event = tokio::time::timeout(WAIT, stream.message())
            .await
            .expect("a status in time")
            .expect("watch stream")
            .expect("watch stream open");
        match event.event {
            Some(Event::Snapshot(snapshot)) => return snapshot.servers[0].clone(),
            Some(Event::ServerStatus(status)) => return status,
            _ => continue,
        }
    }
}

/// Follows the server's statuses until one `matches`, asserting each one is READY.
async fn stays_ready_until(
    stream: &mut Streaming<proto::WatchEvent>,
    what: &str,
    matches: impl Fn(&proto::ServerStatus) -> bool,
) -> proto::ServerStatus {
    loop {
        let status = next_status(stream).await;
        assert_eq!(
            status.state(),
            ServerState::Ready,
            "waiting for {what}: {status:?}"
        );
        if matches(&status) {
            return status;
        }
    }
}

#[tokio::test]
async fn three_replicas_run_three_processes_and_list_each_tool_once() {
    let broker = broker_with(&[], 3, "").await;
    let replicas = children(broker.pid());
    assert_eq!(replicas.len(), 3, "children of the broker: {replicas:?}");

    let single = Broker::start(&format!("servers:\n{}", demo_server("demo", ""))).await;
    single.wait_ready().await;
    let listed = broker.tools().await.tools;
    assert_eq!(names(&listed), names(&single.tools().await.tools));
    let status = broker.server("demo").await;
    assert_eq!(status.tool_count as usize, listed.len());
    assert_eq!(broker.text("echo", r#"{"message": "hi"}"#).await, "hi");
}

#[tokio::test]
async fn a_serial_server_runs_one_call_at_a_time() {
    // The control for the test below: without replicas, calls queue in the server.
    let broker = broker_with(&["--serial"], 1, "").await;
    let took = sleep_together(&broker, 3, 200).await;
    assert!(
        took >= Duration::from_millis(600),
        "3 × 200 ms took {took:?}"
    );
}

#[tokio::test]
async fn serial_replicas_run_calls_side_by_side() {
    let broker = broker_with(&["--serial"], 4, "").await;
    let took = sleep_together(&broker, 4, 300).await;
    // One at a time would take 1.2 s: each call had a replica to itself.
    assert!(
        took < Duration::from_millis(900),
        "4 × 300 ms took {took:?}"
    );
}

#[tokio::test]
async fn a_killed_replica_comes_back_while_the_others_serve() {
    let broker = broker_with(&[], 3, "    backoff_initial: 1s\n").await;
    let request = proto::WatchRequest {
        servers: vec!["demo".into()],
    };
    let mut watch = broker
        .client
        .clone()
        .watch(request)
        .await
        .unwrap()
        .into_inner();
    next_status(&mut watch).await;
    // One call on each replica (the least busy gets the next), then one replica dies.
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let mut client = broker.client.clone();
            tokio::spawn(async move { client.call_tool(sleep_request(2_000)).await })
        })
        .collect();
    broker
        .wait_for_logs("sleep started", 3, |l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("sleep started"))
        })
        .await;
    let killed = broker.kill_child();

    let down = stays_ready_until(&mut watch, "2 of 3", |s| {
        s.message.starts_with("2 of 3 replicas ready")
    })
    .await;
    assert!(down.message.contains("session lost"), "{}", down.message);
    for i in 0..5 {
        let message = format!(r#"{{"message": "still here {i}"}}"#);
        assert_eq!(
            broker.text("echo", &message).await,
            format!("still here {i}")
        );
    }
    let mut outcomes = Vec::new();
    for call in calls {
        let outcome = tokio::time::timeout(WAIT, call).await.unwrap().unwrap();
        outcomes.push(outcome.map(|_| ()).map_err(|status| status.code()));
    }
    outcomes.sort_by_key(|outcome| outcome.is_ok());
    assert_eq!(outcomes, [Err(Code::Unavailable), Ok(()), Ok(())]);

    let back = stays_ready_until(&mut watch, "3 of 3 again", |s| {
        s.message.starts_with("3 of 3 replicas ready")
    })
    .await;
    assert_eq!(back.restarts, 1);
    assert!(!alive(killed));
    let now = children(broker.pid());
    assert_eq!(now.len(), 3, "{now:?}");
    assert!(!now.contains(&killed));
}
