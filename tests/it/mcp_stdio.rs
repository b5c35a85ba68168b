//! `toolbroker mcp-stdio`: a real broker (the demo server upstream) served as an MCP server on
//! stdio by a child process, driven by rmcp's client over the child's stdin/stdout (and once
//! by the Python SDK's): the catalog, calls with progress, questions and cancellation, list
//! changes after a config reload, tokens, and the process's lifetime.

use std::{net::SocketAddr, process::Stdio, sync::Arc, time::Duration};

use crate::common::{self, Broker, Config, WAIT, demo, stderr_says, toolbroker_bin};
use base64::{Engine, engine::general_purpose::STANDARD as BASE64};
use rmcp::{
    ClientHandler, ErrorData, RoleClient, ServiceExt as _,
    model::{
        CallToolRequestParams, ClientCapabilities, ClientConfig, ContentBlock, ElicitRequestParams,
        ElicitResult, ElicitationAction, ErrorCode, GetPromptRequestParams, Implementation,
        ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams, ResourceContents,
        ServerNotification, SubscriptionFilter,
    },
    service::{
        ClientLifecycleMode, ClientServiceExt as _, NotificationContext, RequestContext,
        RunningService, ServiceError,
    },
    transport::TokioChildProcess,
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::Command,
    sync::watch,
};
use toolbroker::proto;

/// What the MCP client saw from the server, besides answers.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Progress(ProgressNotificationParam),
    Question(String),
    ToolsChanged,
    ResourcesChanged,
    PromptsChanged,
}

/// The test's MCP client: declares elicitation, answers every question "Ada", and records what
/// the server sends.
#[derive(Clone)]
struct Recorder(Arc<watch::Sender<Vec<Seen>>>);

impl Recorder {
    fn saw(&self, seen: Seen) {
        self.0.send_modify(|all| all.push(seen));
    }
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder().enable_elicitation().build();
        ClientConfig::new(capabilities, Implementation::new("mcp-stdio-test", "1.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message,
            other => format!("{other:?}"),
        };
        self.saw(Seen::Question(message));
        let mut answer = ElicitResult::new(ElicitationAction::Accept);
        answer.content = Some(json!({"answer": "Ada"}));
        Ok(answer)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.saw(Seen::Progress(params));
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.saw(Seen::ToolsChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.saw(Seen::ResourcesChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.saw(Seen::PromptsChanged);
    }
}

/// `toolbroker mcp-stdio` as a child process with an rmcp client on its stdio.
struct StdioFace {
    client: RunningService<RoleClient, Recorder>,
    seen: watch::Receiver<Vec<Seen>>,
    stderr: watch::Receiver<Vec<String>>,
}

fn broker_url(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

/// A `toolbroker mcp-stdio --broker http://ADDR ARGS` command, logging at debug.
fn command(addr: SocketAddr, args: &[&str]) -> Command {
    command_at(&broker_url(addr), args)
}

/// A `toolbroker mcp-stdio --broker BROKER ARGS` command, logging at debug.
fn command_at(broker: &str, args: &[&str]) -> Command {
    let mut command = Command::new(toolbroker_bin());
    command
        .args(["mcp-stdio", "--broker", broker])
        .args(args)
        .env("RUST_LOG", "info,toolbroker=debug")
        .kill_on_drop(true);
    command
}

/// Collects the lines of a child's pipe as they come.
fn lines(pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> watch::Receiver<Vec<String>> {
    let (tx, rx) = watch::channel(Vec::new());
    tokio::spawn(async move {
        let mut lines = BufReader::new(pipe).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tx.send_modify(|all| all.push(line));
        }
    });
    rx
}

impl StdioFace {
    /// Launches it on the broker at `addr` and initializes the session.
    async fn launch(addr: SocketAddr, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::launch_at(&broker_url(addr), args, env).await
    }

    /// Launches it with `--broker broker` and initializes the session.
    async fn launch_at(broker: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = command_at(broker, args);
        command.envs(env.iter().copied());
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn toolbroker mcp-stdio");
        let stderr = lines(stderr.expect("stderr is piped"));
        let (tx, seen) = watch::channel(Vec::new());
        let client = tokio::time::timeout(WAIT, Recorder(Arc::new(tx)).serve(transport))
            .await
            .expect("initialized in time")
            .unwrap_or_else(|e| panic!("initialized: {e}; stderr: {:?}", stderr.borrow()));
        Self {
            client,
            seen,
            stderr,
        }
    }

    /// Waits until what the client saw satisfies `enough`, and returns it all.
    async fn wait_seen(&self, what: &str, enough: impl Fn(&[Seen]) -> bool) -> Vec<Seen> {
        let mut seen = self.seen.clone();
        tokio::time::timeout(WAIT, seen.wait_for(|all| enough(all)))
            .await
            .unwrap_or_else(|_| panic!("no {what} within {WAIT:?}: {:?}", self.seen.borrow()))
            .expect("the recorder is alive")
            .clone()
    }

    /// Waits until the process logged a line containing `text`.
    async fn wait_logged(&self, text: &str) {
        let mut stderr = self.stderr.clone();
        tokio::time::timeout(
            WAIT,
            stderr.wait_for(|all| all.iter().any(|l| l.contains(text))),
        )
        .await
        .unwrap_or_else(|_| {
            panic!(
                "no log {text:?} within {WAIT:?}: {:?}",
                self.stderr.borrow()
            )
        })
        .expect("the stderr reader is alive");
    }
}

fn arguments(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().expect("an object").clone()
}

fn text(content: &[ContentBlock]) -> Vec<&str> {
    content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect()
}

fn mcp_code(error: ServiceError) -> ErrorCode {
    match error {
        ServiceError::McpError(error) => error.code,
        other => panic!("not an MCP error: {other}"),
    }
}

async fn demo_broker() -> Broker {
    let broker = Broker::builder()
        .server(demo("demo").prefix("d_"))
        .start()
        .await;
    broker.wait_ready().await;
    broker
}

#[tokio::test]
async fn the_brokers_tools_resources_and_prompts_are_served_on_stdio() {
    let broker = demo_broker().await;
    let face = StdioFace::launch(broker.addr, &[], &[]).await;
    let client = &face.client;

    let info = client.peer_info().expect("initialized");
    assert_eq!(info.server_info.as_ref().unwrap().name, "toolbroker");
    assert_eq!(
        serde_json::to_value(&info.capabilities).unwrap(),
        json!({"tools": {"listChanged": true}, "resources": {"listChanged": true},
               "prompts": {"listChanged": true}, "logging": {}})
    );

    // The same tools as ListTools, with the raw schemas and the hints.
    let listed = broker.tools().await.tools;
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, common::names(&listed));
    let grpc_echo = listed.iter().find(|t| t.name == "d_echo").unwrap();
    let echo = tools.iter().find(|t| t.name == "d_echo").unwrap();
    let schema: Value = serde_json::from_str(&grpc_echo.input_schema_json).unwrap();
    assert_eq!(Value::Object((*echo.input_schema).clone()), schema);
    assert_eq!(echo.title.as_deref(), Some("Echo"));
    let hints = echo.annotations.as_ref().expect("annotations");
    assert_eq!(
        (hints.read_only_hint, hints.open_world_hint),
        (Some(true), Some(false))
    );
    let stats = tools.iter().find(|t| t.name == "d_stats").unwrap();
    let output = stats.output_schema.as_ref().expect("an output schema");
    assert_eq!(output["properties"]["mean"]["type"], "number");

    let params = CallToolRequestParams::new("d_echo")
        .with_arguments(arguments(json!({"message": "through stdio"})));
    let result = client.call_tool(params).await.expect("tools/call");
    assert_eq!(text(&result.content), ["through stdio"]);
    assert_ne!(result.is_error, Some(true));

    // Binary content is the broker's bytes, base64 again.
    let all = client
        .call_tool(CallToolRequestParams::new("d_tiny_image"))
        .await
        .expect("tools/call tiny_image");
    let grpc = broker.call("d_tiny_image", "{}").await.unwrap();
    let Some(proto::content::Kind::Image(png)) = &grpc.content[0].kind else {
        panic!("{grpc:?}");
    };
    let image = all.content[0].as_image().expect("an image");
    assert_eq!(BASE64.decode(&image.data).unwrap(), png.data);
    assert_eq!(image.mime_type, "image/png");

    let unknown = client
        .call_tool(CallToolRequestParams::new("d_nope"))
        .await
        .unwrap_err();
    assert_eq!(mcp_code(unknown), ErrorCode::INVALID_PARAMS);
    let tool_error = client
        .call_tool(
            CallToolRequestParams::new("d_fail")
                .with_arguments(arguments(json!({"message": "no"}))),
        )
        .await
        .expect("a tool error is a result");
    assert_eq!(
        (tool_error.is_error, text(&tool_error.content)),
        (Some(true), vec!["no"])
    );

    // Resources: listed, read as text and as bytes, and through the template.
    let resources = client.list_all_resources().await.expect("resources/list");
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["demo://readme", "demo://logo.png"]);
    let templates = client
        .list_all_resource_templates()
        .await
        .expect("resources/templates/list");
    assert_eq!(templates[0].uri_template, "demo://echo/{text}");

    let read = |uri: &str| client.read_resource(ReadResourceRequestParams::new(uri));
    let readme = read("demo://readme").await.expect("read the readme");
    let ResourceContents::TextResourceContents {
        text, mime_type, ..
    } = &readme.contents[0]
    else {
        panic!("{readme:?}");
    };
    assert!(text.starts_with("The toolbroker demo server"), "{text}");
    assert_eq!(mime_type.as_deref(), Some("text/plain"));

    let logo = read("demo://logo.png").await.expect("read the logo");
    let ResourceContents::BlobResourceContents {
        blob, mime_type, ..
    } = &logo.contents[0]
    else {
        panic!("{logo:?}");
    };
    let request = proto::ReadResourceRequest {
        server: "demo".into(),
        uri: "demo://logo.png".into(),
    };
    let grpc = broker
        .client
        .clone()
        .read_resource(request)
        .await
        .unwrap()
        .into_inner();
    let Some(proto::resource_contents::Contents::Blob(bytes)) = &grpc.contents[0].contents else {
        panic!("{grpc:?}");
    };
    assert_eq!(&BASE64.decode(blob).unwrap(), bytes, "byte for byte");
    assert!(bytes.starts_with(b"\x89PNG"));
    assert_eq!(mime_type.as_deref(), Some("image/png"));

    let echoed = read("demo://echo/hello")
        .await
        .expect("read through the template");
    assert!(
        matches!(&echoed.contents[0], ResourceContents::TextResourceContents { text, uri, .. }
            if text == "hello" && uri == "demo://echo/hello"),
        "{echoed:?}"
    );
    let missing = read("nowhere://x").await.unwrap_err();
    assert_eq!(mcp_code(missing), ErrorCode::RESOURCE_NOT_FOUND);

    // Prompts.
    let prompts = client.list_all_prompts().await.expect("prompts/list");
    let summarize = prompts
        .iter()
        .find(|p| p.name == "d_summarize")
        .expect("d_summarize");
    let topic = &summarize.arguments.as_ref().unwrap()[0];
    assert_eq!((topic.name.as_str(), topic.required), ("topic", Some(true)));
    let params = GetPromptRequestParams::new("d_summarize")
        .with_arguments(arguments(json!({"topic": "MCP", "style": "in one line"})));
    let prompt = client.get_prompt(params).await.expect("prompts/get");
    assert_eq!(prompt.description.as_deref(), Some("A summary of MCP"));
    assert_eq!(
        prompt.messages[0].content.as_text().unwrap().text,
        "Summarize MCP in one line."
    );
    let without_topic = client
        .get_prompt(GetPromptRequestParams::new("d_summarize"))
        .await
        .unwrap_err();
    assert_eq!(mcp_code(without_topic), ErrorCode::INVALID_PARAMS);
}

#[tokio::test]
async fn progress_and_questions_of_a_call_reach_the_client() {
    let broker = demo_broker().await;
    let face = StdioFace::launch(broker.addr, &[], &[]).await;

    // rmcp's client gives every request a progress token.
    let params = CallToolRequestParams::new("d_sleep")
        .with_arguments(arguments(json!({"ms": 1000, "steps": 5})));
    let result = face
        .client
        .call_tool(params)
        .await
        .expect("tools/call sleep");
    assert_eq!(text(&result.content), ["slept 1000 ms"]);
    let progress = |seen: &[Seen]| -> Vec<ProgressNotificationParam> {
        seen.iter()
            .filter_map(|s| match s {
                Seen::Progress(p) => Some(p.clone()),
                _ => None,
            })
            .collect()
    };
    // 200 ms apart: all but the last, sent just before the result, are surely in.
    let before = progress(&face.seen.borrow());
    assert!(before.len() >= 4, "progress before the result: {before:?}");
    let all = face
        .wait_seen("5 progress notifications", |s| progress(s).len() == 5)
        .await;
    let all = progress(&all);
    let steps: Vec<(f64, Option<f64>)> = all.iter().map(|p| (p.progress, p.total)).collect();
    assert_eq!(
        steps,
        (1..=5)
            .map(|n| (f64::from(n), Some(5.0)))
            .collect::<Vec<_>>()
    );
    assert_eq!(all[4].message.as_deref(), Some("slept 1000 of 1000 ms"));
    assert!(
        all.windows(2)
            .all(|w| w[0].progress_token == w[1].progress_token)
    );

    // The question goes to the client, and its answer to the tool.
    let params = CallToolRequestParams::new("d_ask").with_arguments(arguments(
        json!({"question": "Who wrote the first program?"}),
    ));
    let result = face.client.call_tool(params).await.expect("tools/call ask");
    assert_eq!(text(&result.content), ["the user answered: Ada"]);
    assert!(
        face.seen
            .borrow()
            .contains(&Seen::Question("Who wrote the first program?".into())),
        "{:?}",
        face.seen.borrow()
    );
}

#[tokio::test]
async fn a_call_the_client_cancels_is_cancelled_upstream() {
    let broker = demo_broker().await;
    let face = StdioFace::launch(broker.addr, &[], &[]).await;
    let params =
        CallToolRequestParams::new("d_sleep").with_arguments(arguments(json!({"ms": 60000})));
    let call = face.client.call_tool(params);
    tokio::select! {
        result = call => panic!("a minute's sleep returned: {result:?}"),
        _ = broker.wait_for_log("the sleep", stderr_says("sleep started")) => {}
    }
    // Dropping the call sent notifications/cancelled; the upstream request is cancelled.
    let cancelled = broker
        .wait_for_log("the cancellation", stderr_says("sleep cancelled"))
        .await;
    let message = cancelled["message"].as_str().unwrap();
    assert!(message.contains("request cancelled"), "{message}");
    // The session goes on.
    let params =
        CallToolRequestParams::new("d_echo").with_arguments(arguments(json!({"message": "on"})));
    let result = face.client.call_tool(params).await.expect("tools/call");
    assert_eq!(text(&result.content), ["on"]);
}

/// Replaces the config file as editors do: write a new file, rename it over the old one.
fn rewrite(broker: &Broker, config: &Config) {
    broker.rewrite_config(&config.text());
}

#[tokio::test]
async fn a_change_of_the_brokers_catalog_is_announced() {
    let broker = demo_broker().await;
    let face = StdioFace::launch(broker.addr, &[], &[]).await;
    let before = face.client.list_all_tools().await.expect("tools/list");
    assert!(!before.iter().any(|t| t.name == "m_echo"));
    // Changes made before the Watch stream is open would be in its snapshot, unannounced.
    face.wait_logged("following the broker's Watch stream")
        .await;

    let more = Config::new()
        .server(demo("demo").prefix("d_"))
        .server(demo("more").prefix("m_"));
    rewrite(&broker, &more);
    face.wait_seen("tools/list_changed", |s| s.contains(&Seen::ToolsChanged))
        .await;
    let after = face.client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = after.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        names.contains(&"m_echo") && names.contains(&"d_echo"),
        "{names:?}"
    );
    assert_eq!(names, common::names(&broker.tools().await.tools));
    // The new server's resources and prompts are announced too.
    face.wait_seen("resources and prompts list_changed", |s| {
        s.contains(&Seen::ResourcesChanged) && s.contains(&Seen::PromptsChanged)
    })
    .await;
    let prompts = face.client.list_all_prompts().await.expect("prompts/list");
    assert!(
        prompts.iter().any(|p| p.name == "m_summarize"),
        "{prompts:?}"
    );
}

#[tokio::test]
async fn a_2026_07_28_client_hears_of_changes_on_its_subscription() {
    let broker = demo_broker().await;
    let (transport, stderr) = TokioChildProcess::builder(command(broker.addr, &[]))
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolbroker mcp-stdio");
    let mut stderr = lines(stderr.unwrap());
    let (tx, _seen) = watch::channel(Vec::new());
    let modern = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = tokio::time::timeout(
        WAIT,
        Recorder(Arc::new(tx)).serve_with_lifecycle(transport, modern),
    )
    .await
    .expect("discovered in time")
    .expect("discovered");
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = client.listen(filter).await.expect("subscriptions/listen");
    let following = |l: &Vec<String>| {
        l.iter()
            .any(|l| l.contains("following the broker's Watch stream"))
    };
    tokio::time::timeout(WAIT, stderr.wait_for(following))
        .await
        .expect("the Watch stream followed in time")
        .unwrap();

    // The demo server adds a tool at run time: the broker's catalog changes.
    let params =
        CallToolRequestParams::new("d_add_tool").with_arguments(arguments(json!({"name": "late"})));
    let added = client.call_tool(params).await.expect("tools/call add_tool");
    assert_ne!(added.is_error, Some(true), "{added:?}");
    let notification = tokio::time::timeout(WAIT, subscription.next())
        .await
        .expect("a notification in time")
        .expect("the subscription is open")
        .expect("a notification");
    assert!(
        matches!(
            notification,
            ServerNotification::ToolListChangedNotification(_)
        ),
        "{notification:?}"
    );
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "d_late"), "{tools:?}");
}

/// Runs `toolbroker mcp-stdio` expecting it to stop at start: its exit code and stderr.
async fn refused(addr: SocketAddr, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = command(addr, args);
    command
        .envs(env.iter().copied())
        .env_remove("NO_SUCH_TOKEN_VAR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().expect("spawn toolbroker mcp-stdio");
    // stdin stays open: it must stop on its own.
    let output = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("it stopped in time")
        .expect("wait");
    assert!(output.stdout.is_empty(), "stdout is the protocol's only");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_token_comes_from_the_named_variable_and_a_missing_or_wrong_one_is_said() {
    let auth = json!({"tokens": [{"name": "alice", "value_env": "ALICE"}]});
    let broker = Broker::builder()
        .server(demo("demo"))
        .top("auth", auth)
        .env("ALICE", "alice-token")
        .start()
        .await;
    broker.wait_ready().await;

    let with_token = ["--token-env", "MY_BROKER_TOKEN"];
    let face = StdioFace::launch(
        broker.addr,
        &with_token,
        &[("MY_BROKER_TOKEN", "alice-token")],
    )
    .await;
    let tools = face.client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "echo"));
    let params =
        CallToolRequestParams::new("echo").with_arguments(arguments(json!({"message": "authed"})));
    let result = face.client.call_tool(params).await.expect("tools/call");
    assert_eq!(text(&result.content), ["authed"]);

    let (code, stderr) = refused(broker.addr, &["--token-env", "NO_SUCH_TOKEN_VAR"], &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--token-env NO_SUCH_TOKEN_VAR: the environment variable is not set"),
        "{stderr}"
    );
    let (code, stderr) = refused(broker.addr, &with_token, &[("MY_BROKER_TOKEN", "")]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("the environment variable is empty"),
        "{stderr}"
    );

    let (code, stderr) = refused(broker.addr, &with_token, &[("MY_BROKER_TOKEN", "wrong")]).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("refused to list tools: Unauthenticated")
            && stderr.contains("the token was refused"),
        "{stderr}"
    );
    let (code, stderr) = refused(broker.addr, &[], &[]).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("the broker wants a token: --token-env"),
        "{stderr}"
    );
}

#[tokio::test]
async fn stdout_carries_only_the_protocol_and_closing_stdin_ends_the_process() {
    let broker = demo_broker().await;
    let mut child = command(broker.addr, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn toolbroker mcp-stdio");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = lines(child.stdout.take().unwrap());
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "logging/setLevel",
               "params": {"level": "warning"}}),
        // No progress token: no progress notifications.
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "d_sleep", "arguments": {"ms": 300, "steps": 3}}}),
    ];
    for request in requests {
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
    }
    let answered = |lines: &Vec<String>| lines.iter().any(|l| l.contains(r#""id":3"#));
    let lines = tokio::time::timeout(WAIT, stdout.wait_for(answered))
        .await
        .expect("the call answered in time")
        .unwrap()
        .clone();
    let messages: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON-RPC: {l}")))
        .collect();
    let by_id = |id: i64| {
        messages
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("{messages:?}"))
    };
    assert_eq!(by_id(1)["result"]["serverInfo"]["name"], "toolbroker");
    assert_eq!(by_id(2)["result"], json!({}));
    assert_eq!(by_id(4)["result"], json!({}));
    assert_eq!(by_id(3)["result"]["content"][0]["text"], "slept 300 ms");
    assert!(
        !messages
            .iter()
            .any(|m| m["method"] == "notifications/progress"),
        "{messages:?}"
    );

    drop(stdin);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("it exits once stdin is closed")
        .unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn the_python_sdk_client_lists_and_calls_through_it() {
    let broker = demo_broker().await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/stdio_face_client.py"
    );
    let run = Command::new(common::python::python())
        .arg(script)
        .args([
            toolbroker_bin(),
            &broker_url(broker.addr),
            "d_echo",
            "d_sleep",
        ])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the Python client finished in time")
        .expect("run the Python client");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let seen: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
    assert_eq!(seen["server"], "toolbroker");
    assert_eq!(seen["tools_list_changed"], true);
    let tools: Vec<String> = serde_json::from_value(seen["tools"].clone()).unwrap();
    assert_eq!(tools, common::names(&broker.tools().await.tools));
    assert_eq!(seen["echo_schema"]["required"], json!(["message"]));
    assert_eq!(
        seen["echo"],
        json!({"is_error": false, "text": ["from Python"]})
    );
    assert_eq!(seen["sleep"], json!(["slept 300 ms"]));
    let progress: Vec<f64> = seen["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, [1.0, 2.0, 3.0], "{seen}");
}

#[tokio::test]
async fn a_view_is_served_with_view_and_its_redefinition_announced() {
    let views = serde_json::json!({"math": ["d_add"]});
    let broker = Broker::builder()
        .top("views", views)
        .server(demo("demo").prefix("d_"))
        .start()
        .await;
    broker.wait_ready().await;
    let face = StdioFace::launch(broker.addr, &["--view", "math"], &[]).await;
    let listed = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.into_iter().map(|t| t.name.to_string()).collect()
    };
    assert_eq!(
        listed(face.client.list_all_tools().await.unwrap()),
        ["d_add"]
    );
    face.wait_logged("following the broker's Watch stream")
        .await;
    let wider = Config::new()
        .top("views", serde_json::json!({"math": ["d_add", "d_echo"]}))
        .server(demo("demo").prefix("d_"));
    rewrite(&broker, &wider);
    face.wait_seen("tools/list_changed", |s| s.contains(&Seen::ToolsChanged))
        .await;
    assert_eq!(
        listed(face.client.list_all_tools().await.unwrap()),
        ["d_add", "d_echo"]
    );
    // An unknown view is said at start, and the process exits.
    let (code, stderr) = refused(broker.addr, &["--view", "nope"], &[]).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("unknown view"), "{stderr}");
}

#[tokio::test]
async fn a_client_of_a_view_cannot_call_a_tool_outside_it_on_either_face() {
    let broker = Broker::builder()
        .top("views", json!({"math": ["d_add"]}))
        .server(demo("demo").prefix("d_"))
        .start()
        .await;
    broker.wait_ready().await;
    // mcp-stdio --view math: its client knows `d_echo` exists (it is in the demo server)
    // and calls it anyway; refused as an unknown tool, as on /mcp/math.
    let face = StdioFace::launch(broker.addr, &["--view", "math"], &[]).await;
    let outside = face
        .client
        .call_tool(
            CallToolRequestParams::new("d_echo")
                .with_arguments(arguments(json!({"message": "out of view"}))),
        )
        .await
        .unwrap_err();
    assert_eq!(mcp_code(outside), ErrorCode::INVALID_PARAMS);
    let inside = face
        .client
        .call_tool(
            CallToolRequestParams::new("d_add").with_arguments(arguments(json!({"a": 2, "b": 3}))),
        )
        .await
        .expect("a tool of the view");
    assert_eq!(text(&inside.content), ["5"]);
    // A gRPC client naming the view directly: NOT_FOUND outside it and for an unknown view.
    let call = |name: &str, view: &str| proto::CallToolRequest {
        name: name.into(),
        arguments_json: r#"{"message": "x"}"#.into(),
        view: view.into(),
        ..Default::default()
    };
    let mut client = broker.client.clone();
    let outside = client.call_tool(call("d_echo", "math")).await.unwrap_err();
    assert_eq!(outside.code(), tonic::Code::NotFound, "{outside:?}");
    assert!(outside.message().contains("d_echo"), "{outside:?}");
    let unknown = client.call_tool(call("d_add", "nope")).await.unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound, "{unknown:?}");
    assert!(
        unknown.message().contains("math"),
        "names the views: {unknown:?}"
    );
    client
        .call_tool(call("d_echo", ""))
        .await
        .expect("no view: the whole catalog");
}

#[tokio::test]
async fn the_broker_is_reached_by_host_and_port_as_by_its_url_or_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("grpc.sock");
    let broker = common::unix::broker_on_socket(&socket, "agent-token").await;
    broker.wait_ready().await;
    let token = [("BROKER_TOKEN", "agent-token")];
    let plain = broker.addr.to_string();
    let unix = format!("unix://{}", socket.display());
    for address in [plain.as_str(), &broker_url(broker.addr), &unix] {
        let face = StdioFace::launch_at(address, &["--token-env", "BROKER_TOKEN"], &token).await;
        let tools = face.client.list_all_tools().await.expect("tools/list");
        assert!(
            tools.iter().any(|t| t.name == "echo"),
            "{address}: {tools:?}"
        );
        face.client.cancel().await.ok();
    }
}
