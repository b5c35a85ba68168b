//! ListTools and ListServers against our demo server and server-everything over stdio.

use crate::common::{Broker, demo, everything, names};
use serde_json::json;
use toolbroker::proto::{self, ServerState};

/// A ready broker with the demo (prefix `demo_`) and five tools of server-everything (`ev_`).
async fn two_server_broker() -> Broker {
    let allowed = json!([
        "echo",
        "get-sum",
        "get-tiny-image",
        "get-structured-content",
        "get-resource-links"
    ]);
    let broker = Broker::builder()
        .server(demo("demo").prefix("demo_"))
        .server(everything("everything").prefix("ev_").set("tools", allowed))
        .start()
        .await;
    broker.wait_ready().await;
    broker
}

#[tokio::test]
async fn list_tools_shows_both_servers_with_prefixes_and_filters() {
    let broker = two_server_broker().await;
    let response = broker.tools().await;
    let names = names(&response.tools);
    for want in [
        "demo_echo",
        "demo_add",
        "demo_sleep",
        "demo_tiny_image",
        "ev_echo",
        "ev_get-sum",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let from_everything: Vec<_> = names.iter().filter(|n| n.starts_with("ev_")).collect();
    assert_eq!(
        from_everything.len(),
        5,
        "only the allow-listed tools: {from_everything:?}"
    );
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "tools are sorted by name");
    assert!(response.revision > 0);

    let sum = response
        .tools
        .iter()
        .find(|t| t.name == "ev_get-sum")
        .unwrap();
    assert_eq!(
        (sum.server.as_str(), sum.original_name.as_str()),
        ("everything", "get-sum")
    );
    assert!(!sum.description.is_empty());
    let annotations = sum
        .annotations
        .as_ref()
        .expect("server-everything sends annotations");
    assert_eq!(annotations.read_only_hint, Some(true));
}

#[tokio::test]
async fn params_are_converted_and_the_raw_schema_is_kept() {
    let broker = two_server_broker().await;
    let tools = broker.tools().await.tools;
    let add = tools.iter().find(|t| t.name == "demo_add").unwrap();
    let params: Vec<_> = add
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.r#type.as_str(), p.required))
        .collect();
    assert_eq!(params, [("a", "integer", true), ("b", "integer", true)]);

    let echo = tools.iter().find(|t| t.name == "ev_echo").unwrap();
    // Key order as the server sent it (serde_json keeps it), so this is its text, re-encoded.
    assert!(
        echo.input_schema_json
            .starts_with(r#"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object""#),
        "{}",
        echo.input_schema_json
    );
    let schema: serde_json::Value = serde_json::from_str(&echo.input_schema_json).unwrap();
    assert_eq!(schema["required"], serde_json::json!(["message"]));

    let structured = tools
        .iter()
        .find(|t| t.name == "ev_get-structured-content")
        .unwrap();
    assert!(structured.output_schema_json.contains("\"properties\""));
    let location = &structured.params[0];
    assert_eq!(location.enum_values, ["New York", "Chicago", "Los Angeles"]);
}

#[tokio::test]
async fn list_tools_can_be_limited_to_servers() {
    let broker = two_server_broker().await;
    let mut client = broker.client.clone();
    let only = client
        .list_tools(proto::ListToolsRequest {
            servers: vec!["everything".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(only.tools.len(), 5);
    assert!(only.tools.iter().all(|t| t.server == "everything"));

    let unknown = client
        .list_tools(proto::ListToolsRequest {
            servers: vec!["nope".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    assert!(
        unknown.message().contains("\"nope\""),
        "{}",
        unknown.message()
    );
}

#[tokio::test]
async fn list_servers_reports_each_server_ready_with_its_tool_count() {
    let broker = two_server_broker().await;
    let servers = broker.servers().await;
    let summary: Vec<_> = servers
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.state(),
                s.transport.as_str(),
                s.tool_count,
            )
        })
        .collect();
    assert_eq!(summary[1], ("everything", ServerState::Ready, "stdio", 5));
    assert_eq!((summary[0].0, summary[0].1), ("demo", ServerState::Ready));
    assert!(summary[0].3 >= 10, "demo tools: {}", summary[0].3);
    assert!(
        servers[0].message.contains("toolbroker-demo"),
        "{}",
        servers[0].message
    );
    assert!(servers[0].since.is_some());
}

#[tokio::test]
async fn the_first_listed_server_wins_a_name_collision() {
    let broker = Broker::builder()
        .server(everything("everything").set("tools", json!(["echo"])))
        .server(demo("demo"))
        .start()
        .await;
    broker.wait_ready().await;
    let tools = broker.tools().await.tools;
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.server, "everything");
    assert!(tools.iter().any(|t| t.name == "add" && t.server == "demo"));
    let demo = broker.server("demo").await;
    assert!(
        demo.message.contains("\"echo\" skipped") && demo.message.contains("\"everything\""),
        "{}",
        demo.message
    );
    broker
        .wait_for_log("collision warning", |l| {
            l["level"] == "WARN"
                && l["server"] == "demo"
                && l["message"].as_str().is_some_and(|m| m.contains("skipped"))
        })
        .await;
}

#[tokio::test]
async fn every_page_of_tools_list_is_followed() {
    let paged = demo("demo").args(["--extra-tools", "150", "--page-size", "20"]);
    let broker = Broker::builder().server(paged).start().await;
    broker.wait_ready().await;
    let tools = broker.tools().await.tools;
    let synthetic = tools
        .iter()
        .filter(|t| t.name.starts_with("synthetic_"))
        .count();
    assert_eq!(synthetic, 150, "8 pages of 20 and a last one, all listed");
    assert!(names(&tools).contains(&"echo"));
    let one = tools.iter().find(|t| t.name == "synthetic_0001").unwrap();
    let mode = one
        .params
        .iter()
        .find(|p| p.name == "mode")
        .expect("a $ref enum param");
    assert_eq!(mode.enum_values, ["fast", "balanced", "thorough"]);
}

/// Large answers are sent as slices of the cached encoding (no copy): whole, and filtered by
/// server, they must decode to the same tools a plain encoding gives.
#[tokio::test]
async fn large_answers_whole_and_filtered_decode_to_the_same_tools() {
    use crate::common::{command, toolbroker_bin};
    let extra = |name: &str, prefix: &str| {
        command(
            name,
            toolbroker_bin(),
            &["demo-server", "--extra-tools", "150"],
        )
        .prefix(prefix)
    };
    let broker = Broker::builder()
        .server(extra("a", "a_"))
        .server(extra("b", "b_"))
        .start()
        .await;
    broker.wait_ready().await;
    let whole = broker.tools().await;
    assert!(
        prost::Message::encoded_len(&whole) > 256 * 1024,
        "big enough to go in several frames"
    );
    assert_eq!(whole.tools.len(), 2 * (150 + 13));
    let only = |server: &str| {
        let mut client = broker.client.clone();
        let request = proto::ListToolsRequest {
            servers: vec![server.into()],
            ..Default::default()
        };
        async move { client.list_tools(request).await.unwrap().into_inner() }
    };
    for server in ["a", "b"] {
        let filtered = only(server).await;
        let expected: Vec<_> = whole
            .tools
            .iter()
            .filter(|t| t.server == server)
            .cloned()
            .collect();
        assert_eq!(filtered.tools, expected, "server {server}");
        assert_eq!(filtered.revision, whole.revision);
    }
    // A client with HTTP/2's smallest windows: the broker sends 64 KiB, then waits for the
    // client to give them back, however the frames are batched on the way.
    let narrow = tonic::transport::Endpoint::from_shared(format!("http://{}", broker.addr))
        .unwrap()
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .unwrap();
    let listed = proto::tool_broker_client::ToolBrokerClient::new(narrow)
        .max_decoding_message_size(64 << 20)
        .list_tools(proto::ListToolsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed, whole);
}
