//! Watch: a snapshot first, then every change, in order, filtered by server.

use crate::common::{Broker, demo, demo_after};
use toolbroker::proto::{ServerState, watch_event::Event};

#[tokio::test]
async fn watch_starts_with_a_snapshot_then_follows_tool_changes() {
    let broker = Broker::builder().server(demo("demo")).start().await;
    broker.wait_ready().await;
    let mut watch = broker.watch(&[]).await;
    let snapshot = watch.snapshot().await;
    assert!(snapshot.tools.iter().any(|t| t.name == "echo"));
    assert_eq!(snapshot.servers[0].state(), ServerState::Ready);

    // A name LLM APIs reject: it is exposed sanitized, and calls map back to the original.
    let added = broker
        .call("add_tool", r#"{"name": "ns.extra/tool"}"#)
        .await
        .unwrap();
    assert!(!added.is_error, "{added:?}");
    let change = watch.next_tools_change().await;
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
        watch.revision() + 1,
        "a status event follows: tool count"
    );

    broker
        .call("remove_tool", r#"{"name": "ns.extra/tool"}"#)
        .await
        .unwrap();
    let change = watch.next_tools_change().await;
    assert_eq!(change.removed, ["ns_extra_tool"]);
}

#[tokio::test]
async fn watch_only_sends_the_servers_asked_for() {
    let broker = Broker::builder()
        .server(demo("a").prefix("a_"))
        .server(demo("b").prefix("b_"))
        .start()
        .await;
    broker.wait_ready().await;
    let mut watch = broker.watch(&["b"]).await;
    let snapshot = watch.snapshot().await;
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
    let change = watch.next_tools_change().await;
    assert_eq!(
        (change.server.as_str(), change.added[0].name.as_str()),
        ("b", "b_from_b")
    );

    let Err(unknown) = broker.try_watch(&["zz"]).await else {
        panic!("a Watch of an unknown server")
    };
    assert_eq!(unknown.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn watch_shows_a_server_connecting_ready_lost_and_ready_again() {
    // The server starts once the test has seen it connecting: when this file exists.
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let wait_for_go = r#"until [ -e "$1" ]; do sleep 0.05; done"#;
    let slow = demo_after("slow", wait_for_go).args([go.display().to_string()]);
    let broker = Broker::builder().server(slow).start().await;
    let mut watch = broker.watch(&[]).await;
    let snapshot = watch.snapshot().await;
    assert_eq!(snapshot.servers[0].state(), ServerState::Connecting);
    assert!(snapshot.tools.is_empty());
    std::fs::write(&go, "").unwrap();

    let mut saw_tools = false;
    let ready = loop {
        match watch.next().await.event {
            Some(Event::ToolsChanged(change)) => saw_tools = !change.added.is_empty(),
            Some(Event::ServerStatus(status)) if status.state() == ServerState::Ready => {
                break status;
            }
            // The demo's resources and prompts come and go with it.
            Some(Event::ResourcesChanged(_) | Event::PromptsChanged(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    };
    assert!(saw_tools, "tools arrive before the READY status");
    assert!(ready.tool_count > 0);

    let _ = broker.call("crash", "{}").await;
    let mut removed = false;
    let lost = loop {
        match watch.next().await.event {
            Some(Event::ToolsChanged(change)) => {
                removed = change.removed.iter().any(|n| n == "echo")
            }
            Some(Event::ServerStatus(status)) => break status,
            // The demo's resources and prompts come and go with it.
            Some(Event::ResourcesChanged(_) | Event::PromptsChanged(_)) => {}
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
        match watch.next().await.event {
            Some(Event::ToolsChanged(change)) => {
                back = change.added.iter().any(|t| t.name == "echo")
            }
            Some(Event::ServerStatus(status)) if status.state() == ServerState::Ready => {
                break status;
            }
            Some(Event::ServerStatus(status)) => {
                assert_eq!(status.state(), ServerState::Reconnecting, "{status:?}")
            }
            // The demo's resources and prompts come and go with it.
            Some(Event::ResourcesChanged(_) | Event::PromptsChanged(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    };
    assert!(back);
    assert_eq!(again.restarts, 1);
}
