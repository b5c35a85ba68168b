//! `replicas: N`: a stdio server runs as N processes, its tools are listed once, calls go to the
//! least busy replica, and a replica that dies comes back while the others serve.

use crate::common::{
    Broker, Server, WAIT, Watch, alive, children, demo, names, sleep_request, stderr_says,
};
use tonic::Code;
use toolbroker::proto::{self, ServerState};

/// Starts a broker with `server` run as `replicas`, and waits until all of them are ready.
async fn replicated(server: Server, replicas: usize) -> Broker {
    let server = server.set("replicas", replicas);
    let name = server.name().to_owned();
    let broker = Broker::builder().server(server).start().await;
    // One replica shows its own condition, as a server without replicas does.
    let all = format!("{replicas} of {replicas} replicas ready");
    broker
        .wait_for_status(&name, &all, |s| {
            s.state() == ServerState::Ready && (replicas == 1 || s.message.starts_with(&all))
        })
        .await;
    broker
}

/// Sends `count` sleep calls of `ms` at once, waits until each has answered without error and
/// its end is in the log, and returns the demo's `sleep started` and `sleep finished` lines
/// (as "started" and "finished") in the order the broker logged them.
async fn sleep_together(broker: &Broker, count: usize, ms: u64) -> Vec<&'static str> {
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
    // The answer can overtake the stderr line written before it.
    let finished = stderr_says("sleep finished");
    broker
        .wait_for_logs("sleep finished", count, &finished)
        .await;
    let started = stderr_says("sleep started");
    let lines = broker.logs();
    lines
        .iter()
        .filter_map(|line| {
            if started(line) {
                Some("started")
            } else if finished(line) {
                Some("finished")
            } else {
                None
            }
        })
        .collect()
}

/// Follows the server's statuses until one `matches`, asserting each one is READY.
async fn stays_ready_until(
    watch: &mut Watch,
    what: &str,
    matches: impl Fn(&proto::ServerStatus) -> bool,
) -> proto::ServerStatus {
    watch
        .status_until(what, |status| {
            assert_eq!(
                status.state(),
                ServerState::Ready,
                "waiting for {what}: {status:?}"
            );
            matches(status)
        })
        .await
}

#[tokio::test]
async fn three_replicas_run_three_processes_and_list_each_tool_once() {
    let broker = replicated(demo("demo"), 3).await;
    let replicas = children(broker.pid());
    assert_eq!(replicas.len(), 3, "children of the broker: {replicas:?}");

    let single = Broker::builder().server(demo("demo")).start().await;
    single.wait_ready().await;
    let listed = broker.tools().await.tools;
    assert_eq!(names(&listed), names(&single.tools().await.tools));
    let status = broker.server("demo").await;
    assert_eq!(status.tool_count as usize, listed.len());
    assert_eq!(broker.text("echo", r#"{"message": "hi"}"#).await, "hi");
}

#[tokio::test]
async fn a_serial_server_runs_one_call_at_a_time() {
    // The control for the test below: without replicas, calls queue in the server. One process
    // writes these lines, so their order is the order things happened in.
    let broker = replicated(demo("demo").args(["--serial"]), 1).await;
    let lines = sleep_together(&broker, 3, 300).await;
    assert_eq!(
        lines,
        ["started", "finished"].repeat(3),
        "each call starts after the one before it finished"
    );
}

#[tokio::test]
async fn serial_replicas_run_calls_side_by_side() {
    let broker = replicated(demo("demo").args(["--serial"]), 4).await;
    // One at a time, the second call would start only when the first finished, 3 s later:
    // each call had a replica to itself if all four started before any finished. (Only calls
    // sent at once but started 3 s apart could fail this wrongly.)
    let lines = sleep_together(&broker, 4, 3000).await;
    assert_eq!(
        lines,
        ["started"; 4]
            .into_iter()
            .chain(["finished"; 4])
            .collect::<Vec<_>>(),
        "all four calls run at once"
    );
}

#[tokio::test]
async fn a_killed_replica_comes_back_while_the_others_serve() {
    let broker = replicated(demo("demo").set("backoff_initial", "1s"), 3).await;
    let mut watch = broker.watch(&["demo"]).await;
    watch.next_status().await;
    // One call on each replica (the least busy gets the next), then one replica dies.
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let mut client = broker.client.clone();
            tokio::spawn(async move { client.call_tool(sleep_request(2_000)).await })
        })
        .collect();
    broker
        .wait_for_logs("sleep started", 3, stderr_says("sleep started"))
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
