//! What one caller learns of the servers that are not its own: played by two restricted
//! callers (static tokens limited to one demo server's tools each) and an unrestricted one,
//! over ListServers and Watch (its snapshot and its status events); and a server whose `url`
//! holds a password and a key in its query string, whose status message must show neither.

use std::time::Duration;

use crate::common::{Broker, Watch, as_caller, demo, url_server};
use serde_json::json;
use toolbroker::proto::{self, watch_event::Event};

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";
const ADMIN: &str = "admin-token";

async fn broker() -> Broker {
    // A peer that hangs up on every request: the server keeps failing, and its error names
    // the URL it was sending to.
    let rude = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = rude.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for connection in rude.incoming() {
            drop(connection);
        }
    });
    let url = format!("http://agent:PASSWORD@127.0.0.1:{port}/mcp?api_key=SECRET");
    let broker = Broker::builder()
        .top(
            "auth",
            json!({"tokens": [
                {"name": "alice", "value_env": "ALICE", "tools": ["d_*"]},
                {"name": "bob", "value_env": "BOB", "tools": ["e_*"]},
                {"name": "admin", "value_env": "ADMIN"},
            ]}),
        )
        .env("ALICE", ALICE)
        .env("BOB", BOB)
        .env("ADMIN", ADMIN)
        .servers([
            demo("one").prefix("d_"),
            demo("two").prefix("e_"),
            url_server("remote", &url).prefix("h_"),
        ])
        .start()
        .await;
    broker.wait_ready().await;
    broker
}

async fn servers_of(broker: &Broker, token: &str) -> Vec<proto::ServerStatus> {
    let request = as_caller(Some(token), &[], proto::ListServersRequest::default());
    let response = broker.client.clone().list_servers(request).await.unwrap();
    response.into_inner().servers
}

fn names(servers: &[proto::ServerStatus]) -> Vec<&str> {
    servers.iter().map(|s| s.name.as_str()).collect()
}

async fn watch_as(broker: &Broker, token: &str) -> Watch {
    let request = as_caller(Some(token), &[], proto::WatchRequest::default());
    Watch::new(
        broker
            .client
            .clone()
            .watch(request)
            .await
            .unwrap()
            .into_inner(),
    )
}

#[tokio::test]
async fn a_restricted_caller_sees_only_the_servers_of_its_tools() {
    let broker = broker().await;
    assert_eq!(names(&servers_of(&broker, ALICE).await), ["one"]);
    assert_eq!(names(&servers_of(&broker, BOB).await), ["two"]);
    let all = servers_of(&broker, ADMIN).await;
    assert_eq!(names(&all), ["one", "two", "remote"]);

    let mut alice = watch_as(&broker, ALICE).await;
    let mut bob = watch_as(&broker, BOB).await;
    for (watch, mine) in [(&mut alice, "one"), (&mut bob, "two")] {
        let Some(Event::Snapshot(snapshot)) = watch.next().await.event else {
            panic!("a snapshot first");
        };
        assert_eq!(names(&snapshot.servers), [mine]);
    }
    // Bob changes his server (a tool added): his stream hears of it, Alice's does not.
    let add = json!({"name": "bobs_secret_project", "description": "x"}).to_string();
    let request = as_caller(
        Some(BOB),
        &[],
        proto::CallToolRequest {
            name: "e_add_tool".into(),
            arguments_json: add,
            ..Default::default()
        },
    );
    broker
        .client
        .clone()
        .call_tool(request)
        .await
        .expect("e_add_tool");
    let mut heard = Vec::new();
    while !heard
        .iter()
        .any(|e: &Event| matches!(e, Event::ServerStatus(s) if s.name == "two"))
    {
        heard.push(bob.next().await.event.expect("an event"));
    }
    // Bob's tool list changed too, and the remote server keeps failing: none of it is Alice's.
    alice.stays_quiet_for(Duration::from_millis(500)).await;
}

#[tokio::test]
async fn no_status_message_shows_a_urls_userinfo_or_query() {
    let broker = broker().await;
    let mut admin = watch_as(&broker, ADMIN).await;
    let mut statuses = Vec::new();
    while !statuses
        .iter()
        .any(|s: &proto::ServerStatus| s.name == "remote" && s.message.contains("/mcp"))
    {
        match admin.next().await.event.expect("an event") {
            Event::Snapshot(snapshot) => statuses.extend(snapshot.servers),
            Event::ServerStatus(status) => statuses.push(status),
            _ => {}
        }
    }
    statuses.extend(servers_of(&broker, ADMIN).await);
    let shown = statuses
        .iter()
        .find(|s| s.message.contains("/mcp"))
        .unwrap();
    assert!(
        shown.message.contains("http://127.0.0.1:"),
        "{}",
        shown.message
    );
    for status in statuses {
        assert!(
            !status.message.contains("SECRET") && !status.message.contains("PASSWORD"),
            "{}",
            status.message
        );
    }
}
