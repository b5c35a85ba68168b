//! ListResources, ReadResource, ListPrompts and GetPrompt against real servers (our demo, a
//! Python SDK server, server-everything), their list_changed notifications on Watch, and what
//! a restricted token sees of them.

use crate::common::{self, Broker, Watch, command, demo, everything, interactive};
use serde_json::json;
use tonic::Code;
use toolbroker::proto::{self, watch_event::Event};

async fn broker() -> Broker {
    let broker = Broker::builder()
        .servers([
            demo("demo").prefix("d_"),
            interactive("py").prefix("py_"),
            everything("everything").prefix("ev_"),
        ])
        .start()
        .await;
    broker.wait_ready().await;
    broker
}

async fn read(
    broker: &Broker,
    server: &str,
    uri: &str,
) -> Result<proto::ReadResourceResponse, tonic::Status> {
    let request = proto::ReadResourceRequest {
        server: server.into(),
        uri: uri.into(),
    };
    broker
        .client
        .clone()
        .read_resource(request)
        .await
        .map(tonic::Response::into_inner)
}

async fn get_prompt(
    broker: &Broker,
    name: &str,
    arguments: &[(&str, &str)],
) -> Result<proto::GetPromptResponse, tonic::Status> {
    let request = proto::GetPromptRequest {
        name: name.into(),
        arguments: arguments
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    };
    broker
        .client
        .clone()
        .get_prompt(request)
        .await
        .map(tonic::Response::into_inner)
}

async fn resources(broker: &Broker, servers: &[&str]) -> proto::ListResourcesResponse {
    let request = proto::ListResourcesRequest {
        servers: servers.iter().map(|s| (*s).to_owned()).collect(),
    };
    broker
        .client
        .clone()
        .list_resources(request)
        .await
        .expect("ListResources")
        .into_inner()
}

async fn prompts(broker: &Broker) -> Vec<proto::Prompt> {
    broker
        .client
        .clone()
        .list_prompts(proto::ListPromptsRequest::default())
        .await
        .expect("ListPrompts")
        .into_inner()
        .prompts
}

fn text_of(response: &proto::ReadResourceResponse) -> &str {
    match &response.contents[0].contents {
        Some(proto::resource_contents::Contents::Text(text)) => text,
        other => panic!("expected text, got {other:?}"),
    }
}

#[tokio::test]
async fn resources_of_every_server_are_listed_and_read_intact() {
    let broker = broker().await;
    let listed = resources(&broker, &[]).await;
    let uris: Vec<(&str, &str)> = listed
        .resources
        .iter()
        .map(|r| (r.server.as_str(), r.uri.as_str()))
        .collect();
    for want in [
        ("demo", "demo://readme"),
        ("demo", "demo://logo.png"),
        ("py", "memo://hello"),
        ("py", "blob://one-mib"),
        (
            "everything",
            "demo://resource/static/document/architecture.md",
        ),
    ] {
        assert!(uris.contains(&want), "{want:?} missing from {uris:?}");
    }
    let templates: Vec<&str> = listed
        .templates
        .iter()
        .map(|t| t.uri_template.as_str())
        .collect();
    assert!(templates.contains(&"demo://echo/{text}"), "{templates:?}");
    assert!(templates.contains(&"memo://{name}"), "{templates:?}");
    let logo = listed
        .resources
        .iter()
        .find(|r| r.uri == "demo://logo.png")
        .unwrap();
    assert_eq!(
        (logo.mime_type.as_str(), logo.name.as_str()),
        ("image/png", "logo")
    );
    assert!(logo.size.is_some());

    // Only the servers asked for.
    let only_py = resources(&broker, &["py"]).await;
    assert!(
        only_py.resources.iter().all(|r| r.server == "py"),
        "{only_py:?}"
    );

    let hello = read(&broker, "py", "memo://hello").await.unwrap();
    assert_eq!(text_of(&hello), "hello, world");
    assert_eq!(hello.contents[0].mime_type, "text/plain");
    let echoed = read(&broker, "demo", "demo://echo/from-a-template")
        .await
        .unwrap();
    assert_eq!(text_of(&echoed), "from-a-template");

    // Binary as bytes, every one of them.
    let blob = read(&broker, "py", "blob://one-mib").await.unwrap();
    let Some(proto::resource_contents::Contents::Blob(bytes)) = &blob.contents[0].contents else {
        panic!("expected a blob: {:?}", blob.contents[0].mime_type);
    };
    assert_eq!(bytes.len(), 1 << 20);
    assert!(
        bytes
            .iter()
            .enumerate()
            .all(|(i, b)| usize::from(*b) == i % 251)
    );
    let everything_doc = read(
        &broker,
        "everything",
        "demo://resource/static/document/architecture.md",
    )
    .await
    .unwrap();
    assert!(!text_of(&everything_doc).is_empty());
}

#[tokio::test]
async fn missing_resources_and_servers_are_not_found() {
    let broker = broker().await;
    for (server, uri) in [("demo", "demo://nope"), ("py", "memo://nope")] {
        let status = read(&broker, server, uri).await.unwrap_err();
        assert_eq!(status.code(), Code::NotFound, "{server} {uri}: {status:?}");
        assert!(status.message().contains(uri), "{status:?}");
    }
    let status = read(&broker, "nosuch", "demo://readme").await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert!(status.message().contains("unknown server"), "{status:?}");
    let status = read(&broker, "demo", "").await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    let request = proto::ListResourcesRequest {
        servers: vec!["nosuch".into()],
    };
    let status = broker
        .client
        .clone()
        .list_resources(request)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
}

#[tokio::test]
async fn reading_from_a_server_without_resources_is_not_found() {
    // A standard-library Python server that announces tools only and answers any other
    // method "method not found".
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/stalling_mcp_server.py"
    );
    let broker = Broker::builder()
        .server(command("plain", "python3", &[script]))
        .start()
        .await;
    broker.wait_ready().await;
    let status = read(&broker, "plain", "plain://readme").await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert!(
        status
            .message()
            .starts_with("server \"plain\" offers no resources"),
        "{status:?}"
    );
}

#[tokio::test]
async fn prompts_are_listed_by_exposed_name_and_filled_in() {
    let broker = broker().await;
    let listed = prompts(&broker).await;
    let names: Vec<&str> = listed.iter().map(|p| p.name.as_str()).collect();
    for want in [
        "d_summarize",
        "py_greet",
        "ev_simple-prompt",
        "ev_args-prompt",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "sorted by name");
    let greet = listed.iter().find(|p| p.name == "py_greet").unwrap();
    assert_eq!(
        (greet.original_name.as_str(), greet.server.as_str()),
        ("greet", "py")
    );
    let arguments: Vec<(&str, bool)> = greet
        .arguments
        .iter()
        .map(|a| (a.name.as_str(), a.required))
        .collect();
    assert_eq!(arguments, [("name", true), ("style", false)]);

    let filled = get_prompt(
        &broker,
        "d_summarize",
        &[("topic", "MCP"), ("style", "briefly")],
    )
    .await
    .unwrap();
    assert_eq!(filled.messages.len(), 1);
    assert_eq!(filled.messages[0].role, "user");
    let Some(proto::content::Kind::Text(text)) = filled.messages[0]
        .content
        .as_ref()
        .and_then(|c| c.kind.as_ref())
    else {
        panic!("a text message: {filled:?}");
    };
    assert_eq!(text.text, "Summarize MCP briefly.");
    let greeted = get_prompt(&broker, "py_greet", &[("name", "Ada")])
        .await
        .unwrap();
    assert!(
        format!("{greeted:?}").contains("Say hello to Ada"),
        "{greeted:?}"
    );
    let everything_args = get_prompt(&broker, "ev_args-prompt", &[("city", "Paris")])
        .await
        .unwrap();
    assert!(
        format!("{everything_args:?}").contains("Paris"),
        "{everything_args:?}"
    );

    let unknown = get_prompt(&broker, "nope", &[]).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");
    let missing = get_prompt(&broker, "d_summarize", &[]).await.unwrap_err();
    assert_eq!(missing.code(), Code::InvalidArgument, "{missing:?}");
    assert!(missing.message().contains("topic"), "{missing:?}");
}

#[tokio::test]
async fn list_changes_of_resources_and_prompts_reach_watch() {
    let broker = Broker::builder()
        .server(interactive("py").prefix("py_"))
        .start()
        .await;
    broker.wait_ready().await;
    let mut watch = Watch::open(broker.client.clone(), &[]).await.unwrap();
    watch.snapshot().await;
    broker
        .text("py_add_resource", r#"{"name": "fresh", "text": "new"}"#)
        .await;
    let event = watch
        .next_matching(|e| matches!(e, Event::ResourcesChanged(_)))
        .await;
    assert_eq!(
        event,
        Event::ResourcesChanged(proto::ResourcesChanged {
            server: "py".into()
        })
    );
    let listed = resources(&broker, &[]).await;
    assert!(
        listed.resources.iter().any(|r| r.uri == "memo://fresh"),
        "{listed:?}"
    );

    broker.text("py_add_prompt", r#"{"name": "later"}"#).await;
    let event = watch
        .next_matching(|e| matches!(e, Event::PromptsChanged(_)))
        .await;
    assert_eq!(
        event,
        Event::PromptsChanged(proto::PromptsChanged {
            server: "py".into()
        })
    );
    assert!(prompts(&broker).await.iter().any(|p| p.name == "py_later"));
}

#[tokio::test]
async fn a_restricted_token_sees_only_its_prompts_and_resources() {
    let auth = json!({"tokens": [
        {"name": "reader", "value_env": "READER", "tools": ["d_echo"],
         "prompts": ["py_*"], "resources": ["demo"]},
        {"name": "narrow", "value_env": "NARROW", "tools": ["d_echo"]},
        {"name": "viewer", "value_env": "VIEWER", "view": "echoes"},
        {"name": "admin", "value_env": "ADMIN"},
    ]});
    let broker = Broker::builder()
        .top("auth", auth)
        .top("views", json!({"echoes": ["d_echo"]}))
        .env("READER", "reader-token")
        .env("NARROW", "narrow-token")
        .env("VIEWER", "viewer-token")
        .env("ADMIN", "admin-token")
        .servers([demo("demo").prefix("d_"), interactive("py").prefix("py_")])
        .start()
        .await;
    broker.wait_ready().await;
    let as_token = |token: &str| {
        let mut client = broker.client.clone();
        let token = token.to_owned();
        async move {
            let request =
                common::as_caller(Some(&token), &[], proto::ListPromptsRequest::default());
            let prompts = client
                .list_prompts(request)
                .await
                .unwrap()
                .into_inner()
                .prompts;
            let request =
                common::as_caller(Some(&token), &[], proto::ListResourcesRequest::default());
            let resources = client
                .list_resources(request)
                .await
                .unwrap()
                .into_inner()
                .resources;
            let prompt_names: Vec<String> = prompts.into_iter().map(|p| p.name).collect();
            let servers: Vec<String> = resources.into_iter().map(|r| r.server).collect();
            (prompt_names, servers)
        }
    };
    let (prompts, servers) = as_token("reader-token").await;
    assert_eq!(prompts, ["py_greet"]);
    assert!(
        !servers.is_empty() && servers.iter().all(|s| s == "demo"),
        "{servers:?}"
    );
    let (prompts, servers) = as_token("narrow-token").await;
    assert!(
        prompts.is_empty() && servers.is_empty(),
        "none by default: {prompts:?} {servers:?}"
    );
    // Bound to a view and listing no tools: restricted in prompts and resources all the same.
    let (prompts, servers) = as_token("viewer-token").await;
    assert!(
        prompts.is_empty() && servers.is_empty(),
        "a view-bound token: none by default: {prompts:?} {servers:?}"
    );
    let (prompts, servers) = as_token("admin-token").await;
    assert!(prompts.contains(&"d_summarize".to_owned()) && servers.contains(&"py".to_owned()));

    let request = common::as_caller(
        Some("reader-token"),
        &[],
        proto::GetPromptRequest {
            name: "d_summarize".into(),
            arguments: [("topic".to_owned(), "x".to_owned())].into(),
        },
    );
    let denied = broker.client.clone().get_prompt(request).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let request = common::as_caller(
        Some("reader-token"),
        &[],
        proto::ReadResourceRequest {
            server: "py".into(),
            uri: "memo://hello".into(),
        },
    );
    let denied = broker
        .client
        .clone()
        .read_resource(request)
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert!(
        denied.message().contains("auth.tokens[].resources"),
        "{denied:?}"
    );
}
