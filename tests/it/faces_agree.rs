//! The two MCP faces side by side on one broker: `/mcp` (streamable HTTP) and `toolbroker
//! mcp-stdio` (a gRPC client of the broker), each driven by rmcp's client. They must show the
//! same catalog, every field of every tool, resource, template and prompt, and give the same
//! MCP outcome for every refusal of one table: the same JSON-RPC error (code and message), or
//! the same tool result with `isError` (and text), as `src/mcp_model/refusal.rs` says.

use crate::common::{Broker, command, demo, toolbroker_bin};
use rmcp::{
    RoleClient, ServiceExt as _,
    model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams},
    service::{RunningService, ServiceError},
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};
use tokio::process::Command;

/// The token of a caller that may use everything.
const AGENT: &str = "agent-token";
/// The token of a caller that may call `d_echo` only, and get no prompt.
const ALICE: &str = "alice-token";

/// A standard-library Python MCP server over stdio whose one tool, `query`, answers every call
/// with a JSON-RPC error of its own (-32000), as a server whose backend is down might.
const FAILING_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, params = message.get("method"), message.get("params") or {}
    answer = {"jsonrpc": "2.0", "id": message["id"]}
    if method == "initialize":
        answer["result"] = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "failing", "version": "1"}}
    elif method == "tools/list":
        answer["result"] = {"tools": [{"name": "query", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        answer["error"] = {"code": -32000, "message": "the database is down"}
    elif method == "ping":
        answer["result"] = {}
    else:
        answer["error"] = {"code": -32601, "message": "no method " + str(method)}
    print(json.dumps(answer), flush=True)
"#;

use Asker::{Agent, AgentInMath, Alice};
use Expected::{Answered, ToolError};
use Request::{Call, Prompt, Read};

/// One MCP client session, of either face.
type Session = RunningService<RoleClient, ()>;

/// A broker with the `/mcp` face: the demo server as `d_`, and beside it one server for each
/// refusal the demo cannot give (a short timeout, a used-up rate, a caller value nobody sends,
/// a JSON-RPC error), with `audit` if given. Returns it and the face's URL.
async fn broker(audit: Option<Value>) -> (Broker, String) {
    toolbroker::tls_provider::install();
    let tokens = json!([
        {"name": "agent", "value_env": "AGENT"},
        {"name": "alice", "value_env": "ALICE", "tools": ["d_echo"]},
    ]);
    let per_caller = demo("pc")
        .prefix("p_")
        .set("isolation", "per-caller")
        .set("env", json!({"TENANT": "${caller.header.x-tenant}"}))
        .set("discovery", json!({"headers": {"x-tenant": "none"}}));
    let mut builder = Broker::builder()
        .top("auth", json!({ "tokens": tokens }))
        .env("AGENT", AGENT)
        .env("ALICE", ALICE)
        .top("views", json!({"math": ["d_add"]}))
        .top("mcp_listen", "127.0.0.1:0")
        .servers([
            demo("demo").prefix("d_"),
            demo("slow").prefix("s_").set("timeout", "500ms"),
            demo("rated").prefix("r_").set("rate", "1/h"),
            per_caller,
            command("failing", "python3", &["-c", FAILING_SERVER]).prefix("x_"),
        ]);
    if let Some(audit) = audit {
        builder = builder.top("audit", audit);
    }
    let broker = builder.start().await;
    broker.wait_ready().await;
    let addr = broker.face_addr().await;
    (broker, format!("http://{addr}/mcp"))
}

/// The `/mcp` face as the caller with `token`, through `view`'s path when not empty.
async fn http(url: &str, token: &str, view: &str) -> Session {
    let url = match view {
        "" => url.to_owned(),
        view => format!("{url}/{view}"),
    };
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token.to_owned());
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("the MCP face initializes")
}

/// `toolbroker mcp-stdio` as the caller with `token`, with `--view view` when not empty.
async fn stdio(broker: &Broker, token: &str, view: &str) -> Session {
    let mut command = Command::new(toolbroker_bin());
    command
        .args(["mcp-stdio", "--broker", &broker.addr.to_string()])
        .args(["--token-env", "BROKER_TOKEN"])
        .env("BROKER_TOKEN", token)
        .kill_on_drop(true);
    if !view.is_empty() {
        command.args(["--view", view]);
    }
    let transport = TokioChildProcess::new(command).expect("mcp-stdio starts");
    ().serve(transport).await.expect("mcp-stdio initializes")
}

/// Both faces as one caller: (`/mcp`, `mcp-stdio`).
async fn both(broker: &Broker, url: &str, token: &str, view: &str) -> [Session; 2] {
    [
        http(url, token, view).await,
        stdio(broker, token, view).await,
    ]
}

/// What an MCP client got: a result, or a JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// The result, as JSON.
    Result(Value),
    /// The error's code, message and data.
    Error(i32, String, Option<Value>),
}

impl Outcome {
    fn of<T: serde::Serialize>(answer: Result<T, ServiceError>) -> Self {
        match answer {
            Ok(result) => Outcome::Result(serde_json::to_value(result).unwrap()),
            Err(ServiceError::McpError(error)) => {
                Outcome::Error(error.code.0, error.message.into_owned(), error.data)
            }
            Err(other) => panic!("not an MCP answer: {other}"),
        }
    }

    /// What the table says it is.
    fn kind(&self) -> Expected {
        match self {
            Outcome::Result(result) if result["isError"] == json!(true) => Expected::ToolError,
            Outcome::Result(_) => Expected::Answered,
            Outcome::Error(code, ..) => Expected::Protocol(*code),
        }
    }

    /// The outcome as text to compare, the seconds of a "retry in N s" as `N`: two faces
    /// asking a second apart are told to wait a second more or less.
    fn steady(&self) -> String {
        let text = format!("{self:?}");
        let Some(at) = text.find("retry in ").map(|at| at + "retry in ".len()) else {
            return text;
        };
        let rest = text[at..].trim_start_matches(|c: char| c.is_ascii_digit());
        format!("{}N{rest}", &text[..at])
    }
}

/// The kind of outcome a request should have.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expected {
    /// A result (of a call: without `isError`).
    Answered,
    /// A call's result with `isError: true`.
    ToolError,
    /// A JSON-RPC error with this code.
    Protocol(i32),
}

/// One request, of any kind the faces serve.
#[derive(Debug, Clone, Copy)]
enum Request {
    /// `tools/call` of a tool with arguments.
    Call(&'static str, &'static str),
    /// `prompts/get` of a prompt with arguments.
    Prompt(&'static str, &'static str),
    /// `resources/read` of a URI.
    Read(&'static str),
}

impl Request {
    async fn send(self, session: &Session) -> Outcome {
        let object = |json: &str| {
            serde_json::from_str::<Value>(json)
                .unwrap()
                .as_object()
                .cloned()
        };
        match self {
            Request::Call(name, arguments) => {
                let mut params = CallToolRequestParams::new(name);
                params.arguments = object(arguments);
                Outcome::of(session.call_tool(params).await)
            }
            Request::Prompt(name, arguments) => {
                let mut params = GetPromptRequestParams::new(name);
                params.arguments = object(arguments);
                Outcome::of(session.get_prompt(params).await)
            }
            Request::Read(uri) => Outcome::of(
                session
                    .read_resource(ReadResourceRequestParams::new(uri))
                    .await,
            ),
        }
    }
}

/// A JSON-RPC "invalid params" error.
const INVALID: Expected = Expected::Protocol(-32602);
/// MCP's "resource not found" error.
const NO_RESOURCE: Expected = Expected::Protocol(-32002);
/// Arguments of an echo.
const ECHO: &str = r#"{"message": "x"}"#;
/// Arguments of the demo's prompt.
const TOPIC: &str = r#"{"topic": "MCP"}"#;

/// Who asks, through which face's view.
#[derive(Debug, Clone, Copy)]
enum Asker {
    /// A caller that may use everything.
    Agent,
    /// The same through the view `math` (`/mcp/math`, `mcp-stdio --view math`).
    AgentInMath,
    /// A caller that may call `d_echo` only.
    Alice,
}

impl Asker {
    fn token(self) -> &'static str {
        match self {
            Agent | AgentInMath => AGENT,
            Alice => ALICE,
        }
    }

    fn view(self) -> &'static str {
        match self {
            AgentInMath => "math",
            Agent | Alice => "",
        }
    }
}

/// One row: why, who asks, what, and what the one table says they get.
type Case = (&'static str, Asker, Request, Expected);

/// The refusals, and a few answers beside them.
#[rustfmt::skip] // a table: one row a line
const CASES: &[Case] = &[
    ("unknown tool", Agent, Call("d_nope", "{}"), INVALID),
    ("a tool outside the view", AgentInMath, Call("d_echo", ECHO), INVALID),
    ("a tool the token may not call", Alice, Call("d_add", r#"{"a": 1, "b": 2}"#), ToolError),
    ("arguments the schema refuses", Agent, Call("d_add", r#"{"a": "x", "b": 1}"#), ToolError),
    ("a JSON-RPC error from the server", Agent, Call("x_query", "{}"), ToolError),
    ("a used-up rate", Agent, Call("r_echo", ECHO), ToolError),
    ("the server's timeout", Agent, Call("s_sleep", r#"{"ms": 60000}"#), ToolError),
    ("a caller value the caller did not send", Agent, Call("p_echo", ECHO), ToolError),
    ("the tool's own error", Agent, Call("d_fail", ECHO), ToolError),
    ("a call that runs", Agent, Call("d_all_content", "{}"), Answered),
    ("structured content", Agent, Call("d_stats", r#"{"numbers": [1, 4.5]}"#), Answered),
    ("unknown prompt", Agent, Prompt("d_nope", "{}"), INVALID),
    ("a prompt the token may not get", Alice, Prompt("d_summarize", TOPIC), INVALID),
    ("a prompt without its required argument", Agent, Prompt("d_summarize", "{}"), INVALID),
    ("a prompt filled in", Agent, Prompt("d_summarize", TOPIC), Answered),
    ("a resource no server has", Agent, Read("nowhere://x"), NO_RESOURCE),
    ("a resource read", Agent, Read("demo://logo.png"), Answered),
    ("a templated resource read", Agent, Read("demo://echo/hi"), Answered),
];

/// Runs `cases` through both faces; the differences from each other and from the table.
async fn differences(broker: &Broker, url: &str, cases: &[Case]) -> Vec<String> {
    let mut differences = Vec::new();
    for &(why, asker, request, expected) in cases {
        let faces = both(broker, url, asker.token(), asker.view()).await;
        let http = request.send(&faces[0]).await;
        let stdio = request.send(&faces[1]).await;
        for (face, outcome) in [("/mcp", &http), ("mcp-stdio", &stdio)] {
            if outcome.kind() != expected {
                differences.push(format!(
                    "{why}: {face} gave {outcome:?}, the table says {expected:?}"
                ));
            }
        }
        if http.steady() != stdio.steady() {
            differences.push(format!("{why}: /mcp gave {http:?}, mcp-stdio {stdio:?}"));
        }
        for face in faces {
            face.cancel().await.ok();
        }
    }
    differences
}

/// Every tool a session lists, as JSON.
async fn tools(session: &Session) -> Value {
    serde_json::to_value(session.list_all_tools().await.unwrap()).unwrap()
}

/// Every resource, template and prompt a session lists, as JSON.
async fn offers(session: &Session) -> Value {
    json!({
        "resources": session.list_all_resources().await.unwrap(),
        "templates": session.list_all_resource_templates().await.unwrap(),
        "prompts": session.list_all_prompts().await.unwrap(),
    })
}

#[tokio::test]
async fn both_faces_show_the_same_tools_resources_and_prompts() {
    let (broker, url) = broker(None).await;
    for (token, view) in [(AGENT, ""), (AGENT, "math"), (ALICE, "")] {
        let [http, stdio] = both(&broker, &url, token, view).await;
        let listed = tools(&http).await;
        assert!(listed.as_array().is_some_and(|t| !t.is_empty()), "{listed}");
        assert_eq!(listed, tools(&stdio).await, "the tools of {token} {view:?}");
        let offered = offers(&http).await;
        assert_eq!(
            offered,
            offers(&stdio).await,
            "the offers of {token} {view:?}"
        );
        http.cancel().await.ok();
        stdio.cancel().await.ok();
    }
}

#[tokio::test]
async fn both_faces_answer_every_refusal_as_the_one_table_says() {
    let (broker, url) = broker(None).await;
    // The rate of `rated` used up, by a call over gRPC.
    broker
        .call_as(Some(AGENT), &[], "r_echo", r#"{"message": "first"}"#)
        .await
        .expect("the rate's one call");
    let differences = differences(&broker, &url, CASES).await;
    assert!(differences.is_empty(), "{differences:#?}");
}

#[tokio::test]
async fn both_faces_refuse_a_call_the_audit_log_cannot_take_alike() {
    // Every write to /dev/full fails: calls are refused UNAVAILABLE ("refuse" by default).
    let (broker, url) = broker(Some(json!({"file": "/dev/full"}))).await;
    let cases = [(
        "the audit log cannot be written",
        Agent,
        Call("d_echo", ECHO),
        ToolError,
    )];
    let differences = differences(&broker, &url, &cases).await;
    assert!(differences.is_empty(), "{differences:#?}");
}
