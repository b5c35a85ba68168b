//! Hot reload: editing the config file or sending SIGHUP applies only the difference; an
//! invalid file changes nothing and says why.

use std::collections::HashMap;

use crate::common::{Broker, Config, WAIT, demo};
use nix::sys::signal::Signal;
use toolbroker::proto::{self, ServerState, watch_event::Event};

/// Replaces the config file as editors do: write a new file, rename it over the old one.

#[tokio::test]
async fn editing_the_file_applies_only_the_difference() {
    let broker = Broker::builder()
        .server(demo("keep").prefix("k_"))
        .server(demo("gone").prefix("g_"))
        .server(demo("changed").prefix("c_"))
        .start()
        .await;
    broker.wait_ready().await;
    let mut watch = broker.watch(&[]).await;
    watch.snapshot().await;
    let mut client = broker.client.clone();
    let in_flight = tokio::spawn(async move {
        let request = proto::CallToolRequest {
            name: "k_sleep".into(),
            arguments_json: r#"{"ms": 1500}"#.into(),
            ..Default::default()
        };
        client.call_tool(request).await
    });
    broker
        .wait_for_log("the sleep", |l| {
            l["server"] == "keep"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("sleep started"))
        })
        .await;

    let after = Config::new()
        .server(demo("keep").prefix("k_"))
        .server(demo("changed").prefix("c_").set("timeout", "20s"))
        .server(demo("new").prefix("n_"));
    broker.rewrite_config(&after.text());
    let reloaded = broker
        .wait_for_log("the reload", |l| l["message"] == "config reloaded")
        .await;
    assert_eq!(
        (
            &reloaded["started"],
            &reloaded["stopped"],
            &reloaded["restarted"],
            &reloaded["unchanged"]
        ),
        (&"new".into(), &"gone".into(), &"changed".into(), &1.into())
    );

    // Watch tells the story, server by server: no event at all for `keep`.
    let mut states: HashMap<String, Vec<ServerState>> = HashMap::new();
    let mut removed_tools = Vec::new();
    let mut gone_message = String::new();
    while !(states
        .get("new")
        .is_some_and(|s| s.contains(&ServerState::Ready))
        && states
            .get("changed")
            .is_some_and(|s| s.contains(&ServerState::Ready)))
    {
        match watch.next().await.event {
            Some(Event::ServerStatus(status)) => {
                if status.name == "gone" {
                    gone_message = status.message.clone();
                }
                states
                    .entry(status.name.clone())
                    .or_default()
                    .push(status.state());
            }
            Some(Event::ToolsChanged(change)) => removed_tools.extend(change.removed),
            _ => {}
        }
    }
    assert!(
        !states.contains_key("keep"),
        "the untouched server saw no change: {states:?}"
    );
    assert_eq!(states["gone"].last(), Some(&ServerState::Stopped));
    assert!(
        gone_message.contains("removed"),
        "the last word on it: {gone_message}"
    );
    assert!(
        states["changed"].contains(&ServerState::Stopped),
        "changed servers restart: {states:?}"
    );
    assert!(removed_tools.iter().any(|n| n == "g_echo"));

    let finished = tokio::time::timeout(WAIT, in_flight)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        finished.into_inner().text,
        "slept 1500 ms",
        "the untouched session kept its call"
    );
    let names: Vec<String> = broker.servers().await.into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        ["keep", "changed", "new"],
        "the new order is the config's"
    );
    assert_eq!(broker.text("n_echo", r#"{"message": "new"}"#).await, "new");
    assert_eq!(
        broker.call("g_echo", "{}").await.unwrap_err().code(),
        tonic::Code::NotFound
    );
}

#[tokio::test]
async fn an_invalid_file_changes_nothing_and_says_why() {
    let broker = Broker::builder().server(demo("demo")).start().await;
    broker.wait_ready().await;
    // Text, as a person would mistype it.
    broker.rewrite_config("servers:\n  - name: demo\n    comand: typo\n");
    let path = broker.config_path().display().to_string();
    broker
        .wait_for_log("the rejection", |l| {
            l["message"] == "config reload rejected; keeping the running configuration"
        })
        .await;
    // The same line `toolbroker check` prints.
    let expected =
        format!("{path}: servers[0] (demo).comand: unknown field; did you mean \"command\"?");
    broker
        .wait_for_log("the problem", |l| l["message"] == expected.as_str())
        .await;
    assert_eq!(broker.server("demo").await.state(), ServerState::Ready);
    assert_eq!(
        broker.text("echo", r#"{"message": "still"}"#).await,
        "still"
    );
}

#[tokio::test]
async fn sighup_reloads_even_an_unchanged_file() {
    let broker = Broker::builder().server(demo("demo")).start().await;
    broker.wait_ready().await;
    broker.signal(Signal::SIGHUP);
    let reloaded = broker
        .wait_for_log("the reload", |l| l["message"] == "config reloaded")
        .await;
    assert_eq!(reloaded["unchanged"], 1);
    assert_eq!(reloaded["restarted"], "");
    assert_eq!(
        broker.server("demo").await.restarts,
        0,
        "nothing was restarted"
    );
}

#[tokio::test]
async fn a_sighup_as_soon_as_the_broker_listens_reloads_rather_than_kills_it() {
    // `start` returns as soon as the broker logs "listening": no wait for readiness here.
    let broker = Broker::builder().server(demo("demo")).start().await;
    broker.signal(Signal::SIGHUP);
    broker
        .wait_for_log("the reload", |l| l["message"] == "config reloaded")
        .await;
    broker.wait_ready().await;
    assert_eq!(
        broker.text("echo", r#"{"message": "alive"}"#).await,
        "alive"
    );
}
