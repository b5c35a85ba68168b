//! The demo tools as `tools/list` shows them: names, descriptions, annotations, and the argument
//! types whose JSON Schemas (derived with schemars) are the input and output schemas. Pure.

use rmcp::{
    handler::server::tool::schema_for_input,
    model::{JsonObject, Tool, ToolAnnotations},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The fixed tools, each exercising one part of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Builtin {
    Echo,
    Add,
    Stats,
    TinyImage,
    AllContent,
    Fail,
    Sleep,
    Ask,
    EchoMeta,
    Whoami,
    AddTool,
    RemoveTool,
    Crash,
}

impl Builtin {
    /// Every built-in tool, in listing order.
    pub(super) const ALL: [Builtin; 13] = [
        Self::Echo,
        Self::Add,
        Self::Stats,
        Self::TinyImage,
        Self::AllContent,
        Self::Fail,
        Self::Sleep,
        Self::Ask,
        Self::EchoMeta,
        Self::Whoami,
        Self::AddTool,
        Self::RemoveTool,
        Self::Crash,
    ];

    /// The tool's name.
    pub(super) fn name(self) -> &'static str {
        self.texts().0
    }

    /// The tool's name, description and input schema as `tools/list` shows them.
    pub(super) fn definition(self) -> Tool {
        let (name, title, description) = self.texts();
        let tool = Tool::new(name, description, JsonObject::new());
        let tool = match self {
            Self::Echo => tool.with_input_schema::<EchoArgs>(),
            Self::Add => tool.with_input_schema::<AddArgs>(),
            // A title of its own beside its annotations', and an icon: what a server may give.
            Self::Stats => tool
                .with_input_schema::<StatsArgs>()
                .with_output_schema::<Stats>()
                .with_title("Summary statistics")
                .with_icons(vec![super::content::logo_icon()]),
            Self::Fail => tool.with_input_schema::<FailArgs>(),
            Self::Sleep => tool.with_input_schema::<SleepArgs>(),
            Self::Ask => tool.with_input_schema::<AskArgs>(),
            Self::AddTool => tool.with_input_schema::<AddToolArgs>(),
            Self::RemoveTool => tool.with_input_schema::<RemoveToolArgs>(),
            Self::Whoami => tool.with_input_schema::<WhoamiArgs>(),
            Self::TinyImage | Self::AllContent | Self::EchoMeta | Self::Crash => {
                tool.with_input_schema::<NoArgs>()
            }
        };
        tool.with_annotations(self.annotations(title))
    }

    /// (name, title, description); descriptions are one sentence written for a model.
    fn texts(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::Echo => (
                "echo",
                "Echo",
                "Returns the given message unchanged, as text.",
            ),
            Self::Add => (
                "add",
                "Add integers",
                "Adds two 64-bit integers and returns the sum as text, or a tool error if the sum overflows.",
            ),
            Self::Stats => (
                "stats",
                "Statistics",
                "Computes the count, sum, minimum, maximum and mean of a non-empty list of numbers and returns them as structured content.",
            ),
            Self::TinyImage => ("tiny_image", "Tiny image", "Returns a small 8x8 PNG image."),
            Self::AllContent => (
                "all_content",
                "All content kinds",
                "Returns one content block of every MCP kind: text, image, audio, an embedded text resource, an embedded binary resource and a resource link.",
            ),
            Self::Fail => (
                "fail",
                "Always fail",
                "Always fails with a tool error carrying the given message, to test error handling.",
            ),
            Self::Sleep => (
                "sleep",
                "Sleep",
                "Waits the given number of milliseconds, reporting progress in steps, and stops early if the call is cancelled.",
            ),
            Self::Ask => (
                "ask",
                "Ask the user",
                "Asks the user the given question (an MCP elicitation) and returns their answer, or says that they declined.",
            ),
            Self::EchoMeta => (
                "echo_meta",
                "Echo request metadata",
                "Returns the request's _meta object (progress token, trace context and any other keys) as JSON text.",
            ),
            Self::Whoami => (
                "whoami",
                "Who am I",
                "Returns what this server process was started and reached with, as JSON text: its process id, working directory, arguments, the environment variables named in env, and over HTTP the request's headers.",
            ),
            Self::AddTool => (
                "add_tool",
                "Add a tool",
                "Adds a tool with the given name at run time and tells clients that the tool list changed.",
            ),
            Self::RemoveTool => (
                "remove_tool",
                "Remove a tool",
                "Removes a tool that was added with add_tool and tells clients that the tool list changed.",
            ),
            Self::Crash => (
                "crash",
                "Crash the server",
                "Terminates the server process at once with exit status 3, to test supervision.",
            ),
        }
    }

    /// Hints as MCP defines them: only the run-time tool set and the process itself are touched.
    fn annotations(self, title: &str) -> ToolAnnotations {
        let hints = ToolAnnotations::with_title(title).open_world(false);
        match self {
            Self::AddTool => hints.read_only(false).destructive(false).idempotent(false),
            Self::RemoveTool | Self::Crash => hints.read_only(false).destructive(true),
            _ => hints.read_only(true),
        }
    }
}

/// Arguments of `echo`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EchoArgs {
    /// The text to send back.
    pub(super) message: String,
}

/// Arguments of `add`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AddArgs {
    /// The first addend.
    pub(super) a: i64,
    /// The second addend.
    pub(super) b: i64,
}

/// Arguments of `stats`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct StatsArgs {
    /// The numbers to summarise; at least one.
    pub(super) numbers: Vec<f64>,
}

/// The structured result of `stats`; its schema is the tool's `outputSchema`.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Stats {
    /// How many numbers there were.
    pub(super) count: usize,
    /// Their sum.
    pub(super) sum: f64,
    /// The smallest number.
    pub(super) min: f64,
    /// The largest number.
    pub(super) max: f64,
    /// The arithmetic mean.
    pub(super) mean: f64,
}

/// Arguments of `ask`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AskArgs {
    /// The question to put to the user.
    pub(super) question: String,
}

/// Arguments of tools that take none; unknown keys are refused like everywhere else.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NoArgs {}

/// Arguments of `whoami`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WhoamiArgs {
    /// Environment variables whose values to return.
    #[serde(default)]
    pub(super) env: Vec<String>,
}

/// Arguments of `fail`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct FailArgs {
    /// The error message to return; defaults to "this tool always fails".
    pub(super) message: Option<String>,
}

/// Arguments of `sleep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SleepArgs {
    /// How long to sleep, in milliseconds.
    pub(super) ms: u64,
    /// In how many steps to sleep, with one progress notification after each; default 5.
    #[schemars(range(min = 1, max = 1000))]
    pub(super) steps: Option<u32>,
}

/// Arguments of `add_tool`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AddToolArgs {
    /// The new tool's exact name; any non-empty string that is not taken yet.
    pub(super) name: String,
    /// The new tool's description.
    pub(super) description: Option<String>,
}

/// Arguments of `remove_tool`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RemoveToolArgs {
    /// The name of a tool that was added with add_tool.
    pub(super) name: String,
}

/// Arguments of the tools added with `add_tool`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RuntimeArgs {
    /// Any text; it is echoed back with the tool's name.
    #[allow(dead_code, reason = "read only to check the argument's type")]
    text: Option<String>,
}

/// Arguments of the `synthetic_NNNN` tools: a realistic mix of types for schema conversion tests.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(
    dead_code,
    reason = "fields are read only to check the arguments' types"
)]
pub(super) struct SyntheticArgs {
    /// What to look for.
    query: String,
    /// The largest number of results to return.
    #[schemars(range(min = 1, max = 500))]
    limit: Option<u32>,
    /// How hard to try.
    #[serde(default)]
    mode: Mode,
    /// Only return results that pass this filter.
    filter: Option<Filter>,
    /// Labels that results must carry.
    #[serde(default)]
    tags: Vec<String>,
    /// Include scores and explanations in the results.
    verbose: Option<bool>,
}

/// How hard a synthetic tool tries. Serialize lets schemars show the default in the schema.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Fast,
    #[default]
    Balanced,
    Thorough,
}

/// A field filter: a nested object in the synthetic schema.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(
    dead_code,
    reason = "fields are read only to check the arguments' types"
)]
struct Filter {
    /// The field to compare.
    field: String,
    /// The smallest accepted value.
    min: Option<f64>,
    /// The largest accepted value.
    max: Option<f64>,
}

/// The definition of synthetic tool number `n` (`synthetic_0001`, ...).
pub(super) fn synthetic_definition(n: usize) -> Tool {
    Tool::new(
        format!("synthetic_{n:04}"),
        synthetic_description(n),
        input_schema::<SyntheticArgs>(),
    )
    .with_annotations(ToolAnnotations::new().read_only(true))
}

/// Words the synthetic tools' descriptions are made of: 17 × 23 × 29 = 11,339 different
/// sentences, so that a catalog of thousands reads like many tools for many systems (as tool
/// search meets it), not one tool copied.
const SYNTHETIC_VERBS: [&str; 17] = [
    "Create",
    "Read",
    "Update",
    "Delete",
    "List",
    "Search",
    "Archive",
    "Export",
    "Import",
    "Approve",
    "Assign",
    "Merge",
    "Schedule",
    "Summarize",
    "Translate",
    "Validate",
    "Publish",
];
const SYNTHETIC_OBJECTS: [&str; 23] = [
    "invoices",
    "tickets",
    "pull requests",
    "calendar events",
    "customer records",
    "files",
    "dashboards",
    "alerts",
    "deployments",
    "user accounts",
    "payments",
    "orders",
    "contracts",
    "support cases",
    "build logs",
    "database tables",
    "spreadsheets",
    "emails",
    "wiki pages",
    "shipments",
    "expense reports",
    "leads",
    "incidents",
];
const SYNTHETIC_SYSTEMS: [&str; 29] = [
    "Jira",
    "GitHub",
    "Salesforce",
    "Stripe",
    "Slack",
    "Google Drive",
    "Kubernetes",
    "PagerDuty",
    "Confluence",
    "Zendesk",
    "HubSpot",
    "Snowflake",
    "Postgres",
    "Datadog",
    "Notion",
    "Shopify",
    "Workday",
    "ServiceNow",
    "GitLab",
    "Asana",
    "Trello",
    "Dropbox",
    "Outlook",
    "SAP",
    "Linear",
    "Sentry",
    "Grafana",
    "Airtable",
    "QuickBooks",
];

/// "Archive invoices in Jira (synthetic tool 42, …)": a different sentence for each `n` up to
/// 11,339.
fn synthetic_description(n: usize) -> String {
    let verb = SYNTHETIC_VERBS[n % SYNTHETIC_VERBS.len()];
    let object = SYNTHETIC_OBJECTS[(n / SYNTHETIC_VERBS.len()) % SYNTHETIC_OBJECTS.len()];
    let system = SYNTHETIC_SYSTEMS
        [(n / (SYNTHETIC_VERBS.len() * SYNTHETIC_OBJECTS.len())) % SYNTHETIC_SYSTEMS.len()];
    format!(
        "{verb} {object} in {system} (synthetic tool {n}, for load tests: it echoes its arguments back as JSON text)."
    )
}

/// The definition of a tool added at run time.
pub(super) fn runtime_definition(name: &str, description: Option<String>) -> Tool {
    let description = description.unwrap_or_else(|| {
        "A tool added at run time; it echoes its arguments back as JSON text.".to_owned()
    });
    Tool::new(name.to_owned(), description, input_schema::<RuntimeArgs>())
}

/// The input schema of `T`; schemars gives every struct here an object root, which MCP requires.
fn input_schema<T: JsonSchema + 'static>() -> std::sync::Arc<JsonObject> {
    schema_for_input::<T>().expect("argument structs have object schemas")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn every_builtin_has_an_object_schema_and_unique_name() {
        let mut names = std::collections::HashSet::new();
        for builtin in Builtin::ALL {
            let tool = builtin.definition();
            assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
            assert!(
                tool.description
                    .as_deref()
                    .is_some_and(|d| d.ends_with('.'))
            );
            assert!(names.insert(tool.name.clone()), "duplicate {}", tool.name);
        }
    }

    #[test]
    fn synthetic_schema_has_typed_enum_nested_and_array_properties() {
        let tool = synthetic_definition(7);
        assert_eq!(tool.name, "synthetic_0007");
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["query"]));
        let props = &schema["properties"];
        assert_eq!(props["query"]["type"], "string");
        assert_eq!(props["tags"]["type"], "array");
        assert_eq!(props["tags"]["items"]["type"], "string");
        // The enum and the nested object are shared definitions, reached through $ref.
        assert_eq!(
            schema["$defs"]["Mode"]["enum"],
            json!(["fast", "balanced", "thorough"])
        );
        assert_eq!(schema["$defs"]["Filter"]["type"], "object");
        assert_eq!(
            schema["$defs"]["Filter"]["properties"]["field"]["type"],
            "string"
        );
    }

    #[test]
    fn every_argument_struct_refuses_unknown_keys() {
        let definitions = Builtin::ALL
            .iter()
            .map(|b| b.definition())
            .chain([synthetic_definition(1), runtime_definition("x", None)]);
        for tool in definitions {
            assert_eq!(
                tool.input_schema["additionalProperties"],
                json!(false),
                "{}",
                tool.name
            );
        }
    }
}
