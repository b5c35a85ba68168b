//! Watch: a snapshot first, then every change, in order, filtered by server.

mod common;

use common::{Broker, WAIT, demo_server, toolbroker_bin};
use tonic::Streaming;
use toolbroker::proto::{self, ServerState, watch_event::Event};

async fn watch(broker: &Broker, servers: &[&str]) -> Streaming<proto::WatchEvent> {
    let request = proto::WatchRequest {
        servers: servers.iter().map(|s| s.to_string()).collect(),
    };
    broker
        .client
        .clone()
        .watch(request)
        .await
        .expect("Watch")
        .into_inner()
}

async fn next(stream: &mut Streaming<proto::WatchEvent>) -> proto::WatchEvent {
    tokio::time::timeout(WAIT, stream.message())
        .await
        .expect("an event in time")
        .expect("stream ok")
        .expect("stream open")
}

/// The next ToolsChanged event, skipping status events; checks revisions grow.
async fn next_tools_change(
    stream: &mut Streaming<proto::WatchEvent>,
    after: &mut u64,
) -> proto::ToolsChanged {
    loop {
        let event = next(stream).await;
        assert!(
            event.revision > *after,
            "revisions increase: {} then {}",
            after,
            event.revision
        );
        *after = event.revision;
        if let Some(Event::ToolsChanged(change)) = event.event {
            return change;
        }
    }
}

#[tokio::test]
async fn watch_starts_with_a_snapshot_then_follows_tool_changes() {
    let broker = Broker::start(&format!("servers:\n{}", demo_server("demo", ""))).await;
    broker.wait_ready().await;
    let mut stream = watch(&broker, &[]).await;
    let first = next(&mut stream).await;
    let Some(Event::Snapshot(snapshot)) = first.event else {
        panic!("first event is not a snapshot: {first:?}")
    };
    assert!(snapshot.tools.iter().any(|t| t.name == "echo"));
    assert_eq!(snapshot.servers[0].state(), ServerState::Ready);
    let mut revision = first.revision;

    // A name LLM APIs reject: it is exposed sanitized, and calls map back to the original.
    let added = broker
        .call("add_tool", r#"{"name": "ns.extra/tool"}"#)
        .await
        .unwrap();
    assert!(!added.is_error, "{added:?}");
    let change = next_tools_change(&mut stream, &mut revision).await;
    assert_eq!(change.server, "demo");
    let tool = &change.added[0];
    assert_eq!(
        (tool.name.as_str(), tool.original_name.as_str()),
        ("ns_extra_tool", "ns.extra/tool")
    );
    let called = broker
        .call("ns_extra_tool", r#"{"text": "hi"}"#)
        .await
        .unwrap();
    assert!(called.text.starts_with("ns.extra/tool:"), "{}", called.text);
    assert_eq!(
        broker.tools().await.revision,
        revision + 1,
        "a status event follows: tool count"
    );

    broker
        .call("remove_tool", r#"{"name": "ns.extra/tool"}"#)
        .await
        .unwrap();
    let change = next_tools_change(&mut stream, &mut revision).await;
    assert_eq!(change.removed, ["ns_extra_tool"]);
}

#[tokio::test]
async fn watch_only_sends_the_servers_asked_for() {
    let config = format!(
        "servers:\n{}{}",
        demo_server("a", "    prefix: a_\n"),
        demo_server("b", "    prefix: b_\n")
    );
    let broker = Broker::start(&config).await;
    broker.wait_ready().await;
    let mut stream = watch(&broker, &["b"]).await;
    let Some(Event::Snapshot(snapshot)) = next(&mut stream).await.event else {
        panic!("no snapshot")
    };
    assert!(snapshot.tools.iter().all(|t| t.server == "b"));
    assert_eq!(snapshot.servers.len(), 1);

    broker
        .call("a_add_tool", r#"{"name": "from_a"}"#)
        .await
        .unwrap();
    broker
        .call("b_add_tool", r#"{"name": "from_b"}"#)
        .await
        .unwrap();
    let mut revision = 0;
    let change = next_tools_change(&mut stream, &mut revision).await;
    assert_eq!(
        (change.server.as_str(), change.added[0].name.as_str()),
        ("b", "b_from_b")
    );

    let unknown = broker
        .client
        .clone()
        .watch(proto::WatchRequest {
            servers: vec!["zz".into()],
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn watch_shows_a_server_connecting_ready_lost_and_ready_again() {
    let slow = format!(
        "servers:\n  - name: slow\n    command: sh\n    args: [-c, 'sleep 1; exec \"$0\" demo-server', {bin:?}]\n",
        bin = toolbroker_bin()
    );
    let broker = Broker::start(&slow).await;
    let mut stream = watch(&broker, &[]).await;
    let Some(Event::Snapshot(snapshot)) = next(&mut stream).await.event else {
        panic!("no snapshot")
    };
    assert_eq!(snapshot.servers[0].state(), ServerState::Connecting);
    assert!(snapshot.tools.is_empty());

    let mut saw_tools = false;
    let ready = loop {
        match next(&mut stream).await.event {
            Some(Event::ToolsChanged(change)) => saw_tools = !change.added.is_empty(),
            Some(Event::ServerStatus(status)) if status.state() == ServerState::Ready => {
                break status;
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    assert!(saw_tools, "tools arrive before the READY status");
    assert!(ready.tool_count > 0);

    let _ = broker.call("crash", "{}").await;
    let mut removed = false;
    let lost = loop {
        match next(&mut stream).await.event {
            Some(Event::ToolsChanged(change)) => {
                removed = change.removed.iter().any(|n| n == "echo")
            }
            Some(Event::ServerStatus(status)) => break status,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert!(removed, "its tools are withdrawn first");
    assert_eq!(lost.state(), ServerState::Reconnecting);
    assert!(
        lost.message.contains("exited with status 3"),
        "{}",
        lost.message
    );

    // It is started again: its tools come back, then READY with one restart counted.
    let mut back = false;
    let again = loop {
        match next(&mut stream).await.event {
            Some(Event::ToolsChanged(change)) => {
                back = change.added.iter().any(|t| t.name == "echo")
            }
            Some(Event::ServerStatus(status)) if status.state() == ServerState::Ready => {
                break status;
            }
            Some(Event::ServerStatus(status)) => {
                assert_eq!(status.state(), ServerState::Reconnecting, "{status:?}")
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    assert!(back);
    assert_eq!(again.restarts, 1);
}
