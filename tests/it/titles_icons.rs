//! A tool's title and every icon a server gives, end to end: the demo server gives `stats` a
//! title of its own beside its annotations' and an icon, its logo resource an icon, and itself
//! an icon; gRPC (`Tool.title`, `Tool.icons`, `Resource.icons`, `ServerStatus.icons` and
//! `protocol_version`) and the MCP face show them as given. (That `/mcp` and `mcp-stdio`
//! show the same is `faces_agree`.)

use rmcp::{
    ServiceExt,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};
use toolbroker::proto;

use crate::common::Broker;

/// What an icon of the demo looks like: its 8x8 PNG as a `data:` URI.
fn is_the_demo_logo(icon: &proto::Icon) -> bool {
    icon.src.starts_with("data:image/png;base64,iVBOR")
        && icon.mime_type == "image/png"
        && icon.sizes == ["8x8"]
        && icon.theme.is_empty()
}

#[tokio::test]
async fn grpc_shows_a_tools_own_title_and_every_icon_a_server_gives() {
    let broker = Broker::demo_with_face().await;
    let tools = broker.tools().await.tools;
    let tool = |name: &str| tools.iter().find(|t| t.name == name).unwrap().clone();

    let stats = tool("d_stats");
    assert_eq!(stats.title, "Summary statistics", "the tool's own title");
    let hints = stats.annotations.unwrap();
    assert_eq!(
        hints.title, "Statistics",
        "the annotations' title, as given"
    );
    assert!(
        matches!(&stats.icons[..], [icon] if is_the_demo_logo(icon)),
        "{:?}",
        stats.icons
    );
    let echo = tool("d_echo");
    assert_eq!(echo.title, "Echo", "no title of its own: the annotations'");
    assert!(echo.icons.is_empty());

    let resources = broker
        .client
        .clone()
        .list_resources(proto::ListResourcesRequest::default())
        .await
        .unwrap()
        .into_inner()
        .resources;
    let icons_of = |uri: &str| {
        let resource = resources.iter().find(|r| r.uri == uri).unwrap();
        resource.icons.clone()
    };
    assert!(matches!(&icons_of("demo://logo.png")[..], [icon] if is_the_demo_logo(icon)));
    assert!(icons_of("demo://readme").is_empty());

    let server = broker.server("demo").await;
    assert_eq!(server.protocol_version, "2026-07-28");
    assert!(
        matches!(&server.icons[..], [icon] if is_the_demo_logo(icon)),
        "{server:?}"
    );
}

#[tokio::test]
async fn the_mcp_face_shows_the_title_shown_the_annotations_title_and_the_icons() {
    let broker = Broker::demo_with_face().await;
    let config = StreamableHttpClientTransportConfig::with_uri(broker.face_url().await);
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("the MCP face initializes");
    let tools = client.list_all_tools().await.unwrap();
    let stats = tools.iter().find(|t| t.name == "d_stats").unwrap();
    let shown: Value = serde_json::to_value(stats).unwrap();
    assert_eq!(shown["title"], "Summary statistics");
    assert_eq!(shown["annotations"]["title"], "Statistics");
    assert_eq!(shown["icons"][0]["mimeType"], "image/png");
    assert_eq!(shown["icons"][0]["sizes"], json!(["8x8"]));
    assert!(
        shown["icons"][0]["src"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,")
    );

    let resources = client.list_all_resources().await.unwrap();
    let logo = resources
        .iter()
        .find(|r| r.uri == "demo://logo.png")
        .unwrap();
    assert_eq!(logo.icons.as_ref().map(Vec::len), Some(1));
    client.cancel().await.unwrap();
}
