//! Many replicas on one Redis, as they run in production: a real `redis-server`, several broker
//! processes with one config, and the shipped HAProxy config in front of them. One rate budget
//! for all of them, a caller kept on one replica, tasks any replica answers for, and what
//! happens when Redis or a replica goes away under load.

use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tonic::{Code, transport::Channel};
use toolbroker::proto::{
    google::longrunning::{
        self as lro, operation::Result as Ended, operations_client::OperationsClient,
    },
    tool_broker_client::ToolBrokerClient,
};

use crate::common::{
    Broker, WAIT, as_caller, call_request, config::demo, haproxy::Haproxy, redis::RedisServer,
};

const CALLERS: [&str; 4] = ["alice", "bob", "carol", "dave"];

/// A broker on `redis` with callers alice, bob, carol and dave, the demo server, and `extra`
/// top-level settings.
async fn replica(redis: &RedisServer, extra: &[(&str, Value)]) -> Broker {
    let tokens: Vec<Value> = CALLERS
        .iter()
        .map(|name| json!({"name": name, "value_env": format!("{}_TOKEN", name.to_uppercase())}))
        .collect();
    let mut builder = Broker::builder()
        .top("auth", json!({"tokens": tokens}))
        .top("state", json!({"redis": redis.url()}))
        .top("shutdown_grace", "300ms")
        .server(demo("demo"));
    for name in CALLERS {
        builder = builder.env(&format!("{}_TOKEN", name.to_uppercase()), name);
    }
    for (key, value) in extra {
        builder = builder.top(key, value.clone());
    }
    let broker = builder.start().await;
    broker.wait_ready().await;
    broker
}

/// `n` replicas with the same settings.
async fn replicas(redis: &RedisServer, n: usize, extra: &[(&str, Value)]) -> Vec<Broker> {
    let mut started = Vec::new();
    for _ in 0..n {
        started.push(replica(redis, extra).await);
    }
    started
}

/// An `echo` as `caller` over `channel`: the status, and the replica HAProxy says answered.
async fn echo(channel: &Channel, caller: &str) -> (Result<(), tonic::Status>, Option<String>) {
    let request = as_caller(
        Some(caller),
        &[],
        call_request("echo", r#"{"message":"hi"}"#),
    );
    let answered = tokio::time::timeout(
        WAIT,
        ToolBrokerClient::new(channel.clone()).call_tool(request),
    )
    .await
    .expect("CallTool answered in time");
    match answered {
        Ok(response) => {
            let replica = response
                .metadata()
                .get("x-toolbroker-replica")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            (Ok(()), replica)
        }
        Err(status) => (Err(status), None),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_spend_one_rate_budget_and_haproxy_keeps_each_caller_on_one() {
    let redis = RedisServer::start().await;
    let brokers = replicas(&redis, 3, &[("limits", json!({"caller_rate": "10/s"}))]).await;
    let servers = brokers[0]
        .client
        .clone()
        .list_servers(as_caller(Some("alice"), &[], Default::default()))
        .await
        .unwrap()
        .into_inner()
        .servers;
    let status = servers.iter().find(|s| s.name == "demo").unwrap();
    assert!(
        status.message.contains("rates kept in Redis") && status.message.contains(&redis.url()),
        "ListServers says where rates are kept: {:?}",
        status.message
    );

    // alice goes to each replica in turn, as fast as she can, for two seconds: a budget of 10
    // at once and 10 a second is about 30 calls in all, not 3 × that.
    let started = Instant::now();
    let (mut allowed, mut per_replica) = (0, [0usize; 3]);
    let mut refused_message = String::new();
    let mut i = 0;
    while started.elapsed() < Duration::from_secs(2) {
        let broker = &brokers[i % 3];
        match broker
            .call_as(Some("alice"), &[], "echo", r#"{"message":"hi"}"#)
            .await
        {
            Ok(_) => {
                allowed += 1;
                per_replica[i % 3] += 1;
            }
            Err(status) => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                refused_message = status.message().to_owned();
            }
        }
        i += 1;
    }
    assert!(i > 100, "enough calls to go over the budget: {i}");
    assert!(
        (20..=40).contains(&allowed),
        "one budget of 10/s for the three replicas: {allowed} of {i} let through ({per_replica:?})"
    );
    assert!(
        per_replica.iter().all(|&n| n > 0),
        "each replica let some through: {per_replica:?}"
    );
    assert!(
        refused_message.contains("limits.caller_rate"),
        "{refused_message}"
    );

    // Behind HAProxy, each caller's calls all land on one replica, call after call.
    let addrs: Vec<SocketAddr> = brokers.iter().map(|b| b.addr).collect();
    let proxy = Haproxy::start(&addrs).await;
    let mut homes = Vec::new();
    for caller in ["bob", "carol", "dave"] {
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..8 {
            let (result, replica) = echo(&proxy.channel, caller).await;
            result.unwrap_or_else(|status| panic!("{caller}: {status:?}"));
            seen.insert(replica.expect("HAProxy names the replica"));
        }
        assert_eq!(seen.len(), 1, "{caller} stayed on one replica: {seen:?}");
        homes.extend(seen);
    }
    assert!(!homes.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_going_away_under_load_is_allowed_or_refused_as_configured_and_recovered_from() {
    let mut redis = RedisServer::start().await;
    let limits = ("limits", json!({"caller_rate": "5/s"}));
    let metrics = ("metrics_listen", json!("127.0.0.1:0"));
    let allowing = replica(&redis, &[limits.clone(), metrics]).await;
    let refusing = replica(
        &redis,
        &[
            limits,
            (
                "state",
                json!({"redis": redis.url(), "on_unavailable": "refuse"}),
            ),
        ],
    )
    .await;

    redis.stop().await;
    // Redis down: the allowing replica lets every call through (over the 5/s it would
    // enforce), the refusing one answers UNAVAILABLE naming Redis; neither hangs.
    for _ in 0..20 {
        let started = Instant::now();
        allowing
            .call_as(Some("alice"), &[], "echo", r#"{"message":"hi"}"#)
            .await
            .expect("allowed while Redis is down");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
    let refused = refusing
        .call_as(Some("bob"), &[], "echo", r#"{"message":"hi"}"#)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("Redis"), "{}", refused.message());
    let url = allowing.metrics_url().await;
    let errors = metric(&url, "toolbroker_state_errors_total").await;
    assert!(errors >= 20.0, "each failed rate check counted: {errors}");

    // Back: both recover by themselves, and the budget holds again.
    redis.restart().await;
    crate::common::poll(
        "the refusing replica lets calls through again",
        Duration::from_millis(100),
        || async {
            refusing
                .call_as(Some("bob"), &[], "echo", r#"{"message":"hi"}"#)
                .await
                .ok()
        },
    )
    .await;
    let mut refused_again = 0;
    for _ in 0..20 {
        if let Err(status) = allowing
            .call_as(Some("carol"), &[], "echo", r#"{"message":"hi"}"#)
            .await
        {
            assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
            refused_again += 1;
        }
    }
    assert!(
        refused_again >= 10,
        "the 5/s budget holds again: {refused_again} of 20 refused"
    );
}

fn operations(broker: &Broker) -> OperationsClient<Channel> {
    OperationsClient::new(broker.channel.clone())
}

async fn start(broker: &Broker, caller: &str, arguments: &str) -> lro::Operation {
    let request = as_caller(Some(caller), &[], call_request("sleep", arguments));
    broker
        .client
        .clone()
        .start_tool_call(request)
        .await
        .expect("started")
        .into_inner()
}

async fn wait(broker: &Broker, caller: &str, name: &str, within: Duration) -> lro::Operation {
    let request = lro::WaitOperationRequest {
        name: name.to_owned(),
        timeout: Some(within.try_into().unwrap()),
    };
    operations(broker)
        .wait_operation(as_caller(Some(caller), &[], request))
        .await
        .expect("waited")
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_answered_for_by_every_replica_and_a_dead_replicas_task_fails_within_30_s() {
    let redis = RedisServer::start().await;
    let brokers = replicas(&redis, 3, &[]).await;
    let [first, second, third] = &brokers[..] else {
        unreachable!()
    };

    // Started on one, collected from another, listed by a third; bob sees none of it.
    let quick = start(first, "alice", r#"{"ms": 300}"#).await;
    let done = wait(second, "alice", &quick.name, WAIT).await;
    assert!(done.done, "{done:?}");
    assert!(matches!(done.result, Some(Ended::Response(_))), "{done:?}");
    let listed = operations(third)
        .list_operations(as_caller(
            Some("alice"),
            &[],
            lro::ListOperationsRequest::default(),
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(
        listed.operations.iter().any(|op| op.name == quick.name),
        "{listed:?}"
    );
    let stolen = operations(third)
        .get_operation(as_caller(
            Some("bob"),
            &[],
            lro::GetOperationRequest {
                name: quick.name.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(stolen.code(), Code::NotFound, "{stolen:?}");
    let bobs = operations(second)
        .list_operations(as_caller(
            Some("bob"),
            &[],
            lro::ListOperationsRequest::default(),
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(bobs.operations.is_empty(), "{bobs:?}");

    // A cancel sent to another replica reaches the one running the call; bob's is NOT_FOUND.
    let long = start(first, "alice", r#"{"ms": 60000}"#).await;
    let bob_cancel = operations(second)
        .cancel_operation(as_caller(
            Some("bob"),
            &[],
            lro::CancelOperationRequest {
                name: long.name.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(bob_cancel.code(), Code::NotFound);
    operations(second)
        .cancel_operation(as_caller(
            Some("alice"),
            &[],
            lro::CancelOperationRequest {
                name: long.name.clone(),
            },
        ))
        .await
        .unwrap();
    let cancelled = wait(third, "alice", &long.name, WAIT).await;
    let Some(Ended::Error(status)) = &cancelled.result else {
        panic!("{cancelled:?}")
    };
    assert_eq!(status.code, Code::Cancelled as i32, "{status:?}");

    // The replica running a call dies: another says it failed, within 30 s.
    let orphan = start(first, "alice", r#"{"ms": 120000}"#).await;
    first.signal(nix::sys::signal::Signal::SIGKILL);
    let killed = Instant::now();
    let failed = wait(second, "alice", &orphan.name, Duration::from_secs(40)).await;
    let Some(Ended::Error(status)) = &failed.result else {
        panic!("{failed:?}")
    };
    assert_eq!(status.code, Code::Unavailable as i32, "{status:?}");
    assert!(status.message.contains("stopped"), "{status:?}");
    assert!(
        killed.elapsed() < Duration::from_secs(30),
        "failed within 30 s: {:?}",
        killed.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replica_running_a_task_answers_for_it_from_memory_alike_and_to_its_owner_only() {
    let mut redis = RedisServer::start().await;
    let brokers = replicas(&redis, 2, &[]).await;
    let [runner, other] = &brokers[..] else {
        unreachable!()
    };
    let get = async |broker: &Broker, caller: &str, name: &str| {
        let request = lro::GetOperationRequest {
            name: name.to_owned(),
        };
        operations(broker)
            .get_operation(as_caller(Some(caller), &[], request))
            .await
    };

    // Waited for on the replica running it (its runner tells) and read from Redis by
    // another: one answer, to the millisecond.
    let quick = start(runner, "alice", r#"{"ms": 300}"#).await;
    let done = wait(runner, "alice", &quick.name, WAIT).await;
    assert!(matches!(done.result, Some(Ended::Response(_))), "{done:?}");
    let elsewhere = wait(other, "alice", &quick.name, WAIT).await;
    assert_eq!(elsewhere, done);

    // With Redis gone, the replica running a call still answers for it, from memory, to
    // alice only: bob, with the name, is refused there as anywhere. Another replica can only
    // say that Redis is away.
    let long = start(runner, "alice", r#"{"ms": 60000}"#).await;
    redis.stop().await;
    let running = get(runner, "alice", &long.name).await.unwrap().into_inner();
    assert!(!running.done, "{running:?}");
    let still = wait(runner, "alice", &long.name, Duration::from_millis(200)).await;
    assert_eq!(still, running);
    let stolen = get(runner, "bob", &long.name).await.unwrap_err();
    assert_eq!(stolen.code(), Code::NotFound, "{stolen:?}");
    let bob_waits = operations(runner)
        .wait_operation(as_caller(
            Some("bob"),
            &[],
            lro::WaitOperationRequest {
                name: long.name.clone(),
                timeout: Some(Duration::from_secs(5).try_into().unwrap()),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(bob_waits.code(), Code::NotFound, "{bob_waits:?}");
    let away = get(other, "alice", &long.name).await.unwrap_err();
    assert_eq!(away.code(), Code::Unavailable, "{away:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_records_a_caller_may_keep_its_oldest_finished_one_is_forgotten_not_a_running_one()
{
    // 17 running tasks at most, so 170 records kept.
    let redis = RedisServer::start().await;
    let tasks = ("tasks", json!({"max_per_caller": 17}));
    let broker = replica(&redis, &[tasks]).await;
    // 16 running ones first, the oldest: more than a page of the script's scan.
    let mut running = Vec::new();
    for _ in 0..16 {
        running.push(start(&broker, "alice", r#"{"ms": 60000}"#).await.name);
    }
    let mut finished = Vec::new();
    for _ in 0..155 {
        let quick = start(&broker, "alice", r#"{"ms": 0}"#).await;
        let done = wait(&broker, "alice", &quick.name, WAIT).await;
        assert!(done.done, "{done:?}");
        finished.push(quick.name);
    }
    let listed = operations(&broker)
        .list_operations(as_caller(
            Some("alice"),
            &[],
            lro::ListOperationsRequest {
                page_size: 1000,
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<&str> = listed
        .operations
        .iter()
        .map(|op| op.name.as_str())
        .collect();
    assert_eq!(names.len(), 170, "the records alice keeps");
    assert!(running.iter().all(|name| names.contains(&name.as_str())));
    assert!(
        !names.contains(&finished[0].as_str()),
        "the oldest finished one is gone"
    );
    assert!(names.contains(&finished[1].as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_under_load_hands_its_callers_to_the_others() {
    let redis = RedisServer::start().await;
    let brokers = replicas(&redis, 3, &[]).await;
    let addrs: Vec<SocketAddr> = brokers.iter().map(|b| b.addr).collect();
    let proxy = Haproxy::start(&addrs).await;
    let mut homes = std::collections::BTreeMap::new();
    for caller in CALLERS {
        let (result, replica) = echo(&proxy.channel, caller).await;
        result.unwrap();
        homes.insert(caller, replica.expect("HAProxy names the replica"));
    }
    // The replica of alice goes away while every caller keeps calling.
    let victim = homes["alice"].clone();
    let index: usize = victim.trim_start_matches('b').parse::<usize>().unwrap() - 1;
    brokers[index].signal(nix::sys::signal::Signal::SIGKILL);
    let deadline = Instant::now() + WAIT;
    let mut moved = None;
    let mut failed = 0;
    while Instant::now() < deadline && moved.is_none() {
        for caller in CALLERS {
            let (result, replica) = echo(&proxy.channel, caller).await;
            match (result, replica) {
                (Ok(()), Some(replica)) if caller == "alice" && replica != victim => {
                    moved = Some(replica);
                }
                (Ok(()), Some(replica)) if homes[caller] != victim => {
                    assert_eq!(replica, homes[caller], "{caller} stays where it was");
                }
                (Ok(()), _) => {}
                (Err(status), _) => {
                    assert_eq!(status.code(), Code::Unavailable, "{caller}: {status:?}");
                    failed += 1;
                }
            }
        }
    }
    let moved = moved.expect("alice's calls continue on another replica");
    assert_ne!(moved, victim);
    assert!(
        failed < 20,
        "only calls in the moment of the kill fail: {failed}"
    );
}

/// The sum of a metric's samples over its labels (0 when absent).
async fn metric(url: &str, name: &str) -> f64 {
    toolbroker::tls_provider::install();
    let text = reqwest::get(url).await.unwrap().text().await.unwrap();
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
