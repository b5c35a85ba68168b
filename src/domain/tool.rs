//! A tool as the broker holds it: what its server declared, converted once on discovery. Pure.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{
    names::{ExposedName, ServerName, ToolName},
    schema::{Param, params_from_schema},
};

/// Behaviour hints a server gave for a tool (MCP `ToolAnnotations`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Annotations {
    /// A human-readable title.
    pub title: Option<String>,
    /// The tool does not modify its environment.
    pub read_only: Option<bool>,
    /// The tool may perform destructive updates.
    pub destructive: Option<bool>,
    /// Repeated calls with the same arguments have no further effect.
    pub idempotent: Option<bool>,
    /// The tool talks to an open world of external entities.
    pub open_world: Option<bool>,
}

/// One tool as its server declared it, with everything derived from it computed once.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name on the server.
    pub original: ToolName,
    /// The description (empty if none).
    pub description: String,
    /// The input schema, parsed (always a JSON object).
    pub input_schema: Arc<Value>,
    /// The input schema as JSON text, serialized once (key order kept as the server sent it).
    pub input_schema_json: Arc<str>,
    /// The output schema as JSON text, if the server declared one.
    pub output_schema_json: Option<Arc<str>>,
    /// The parameters converted from the input schema.
    pub params: Arc<[Param]>,
    /// Behaviour hints.
    pub annotations: Annotations,
}

impl ToolSpec {
    /// Builds a spec from a tool's declaration, converting its schema once.
    pub fn new(
        original: ToolName,
        description: String,
        input_schema: Map<String, Value>,
        output_schema: Option<&Map<String, Value>>,
        annotations: Annotations,
    ) -> Self {
        let input_schema_json = to_json(&input_schema);
        let output_schema_json = output_schema.map(to_json);
        let params = params_from_schema(&input_schema).into();
        let input_schema = Arc::new(Value::Object(input_schema));
        Self {
            original,
            description,
            input_schema,
            input_schema_json,
            output_schema_json,
            params,
            annotations,
        }
    }
}

/// A tool in the catalog: its exposed name, its server, and its declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct ExposedTool {
    /// The name agents call it by.
    pub name: ExposedName,
    /// The server that provides it.
    pub server: ServerName,
    /// What the server declared.
    pub spec: Arc<ToolSpec>,
}

/// JSON text of a schema object.
fn to_json(schema: &Map<String, Value>) -> Arc<str> {
    serde_json::to_string(schema)
        .expect("a map with string keys always serializes")
        .into()
}
