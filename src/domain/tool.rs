//! A tool as the broker holds it: what its server declared, converted once on discovery. Pure.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use bytestring::ByteString;
use serde_json::{Map, Value};

use super::{
    icon::Icons,
    names::{ExposedName, ServerName, ToolName},
    schema::{Param, params_from_schema},
    schema_text::SchemaText,
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

/// One tool as its server declared it. What is derived from it is computed when needed: the
/// parameters once per catalog revision (into the proto form the revision caches), the parsed
/// schema and its validator on the tool's first call.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The name on the server.
    pub original: ToolName,
    /// The description (empty if none).
    pub description: String,
    /// The input schema as JSON text, serialized once (key order kept as the server sent it).
    /// Only the text is kept: a parsed schema takes about ten times its text's size, so a
    /// catalog of 10,000 tools would hold ~100 MB of trees mostly never read.
    input_schema_json: Arc<SchemaText>,
    /// The input schema parsed from its text when a call first needs it (always an object).
    parsed_input: Arc<OnceLock<Value>>,
    /// The output schema as JSON text, if the server declared one.
    pub output_schema_json: Option<Arc<str>>,
    /// Behaviour hints (with their own title, as the server gave it).
    pub annotations: Annotations,
    /// The tool's own title (MCP's `Tool.title`), as the server gave it.
    pub title: Option<String>,
    /// Its icons, as the server gave them.
    pub icons: Icons,
    /// The input schema's validator, compiled on first use: once per tool revision.
    validator: Arc<OnceLock<SchemaCheck>>,
}

/// What the input schema can check.
enum SchemaCheck {
    Ready(Box<jsonschema::Validator>),
    /// The validator cannot compile this schema (why): arguments pass unchecked.
    Unusable(String),
}

impl std::fmt::Debug for SchemaCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaCheck::Ready(_) => f.write_str("Ready"),
            SchemaCheck::Unusable(why) => write!(f, "Unusable({why:?})"),
        }
    }
}

/// How many schema violations a refusal lists.
const MAX_VIOLATIONS: usize = 5;

// Equality is about what the server declared; the compiled validator is a cache.
impl PartialEq for ToolSpec {
    fn eq(&self, other: &Self) -> bool {
        self.original == other.original
            && self.description == other.description
            && *self.input_schema_json == *other.input_schema_json
            && self.output_schema_json == other.output_schema_json
            && self.annotations == other.annotations
            && self.title == other.title
            && self.icons == other.icons
    }
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
        let input_schema_json = ByteString::from(to_json(&input_schema));
        Self::from_text(
            original,
            description,
            input_schema_json,
            output_schema,
            annotations,
        )
    }

    /// Builds a spec from a tool's declaration whose input schema is already JSON text (of an
    /// object), perhaps a slice of a buffer holding the texts of several tools.
    pub fn from_text(
        original: ToolName,
        description: String,
        input_schema_json: ByteString,
        output_schema: Option<&Map<String, Value>>,
        annotations: Annotations,
    ) -> Self {
        let output_schema_json = output_schema.map(|schema| to_json(schema).into());
        Self {
            original,
            description,
            input_schema_json: Arc::new(SchemaText::new(input_schema_json)),
            parsed_input: Arc::default(),
            output_schema_json,
            annotations,
            title: None,
            icons: Icons::default(),
            validator: Arc::default(),
        }
    }

    /// The same tool with its own `title` and `icons`.
    pub fn shown_as(mut self, title: Option<String>, icons: Icons) -> Self {
        self.title = title;
        self.icons = icons;
        self
    }

    /// The title people see, the one rule every face shows: the tool's own, else its
    /// annotations' (MCP's order of precedence); none when neither is given or both are empty.
    pub fn display_title(&self) -> Option<&str> {
        [self.title.as_deref(), self.annotations.title.as_deref()]
            .into_iter()
            .flatten()
            .find(|title| !title.is_empty())
    }

    /// The same tool with another description (the compiled validator is shared).
    pub fn with_description(&self, description: String) -> Self {
        Self {
            description,
            ..self.clone()
        }
    }

    /// The same tool with another description and input schema.
    pub fn with_input(&self, description: String, input_schema: Map<String, Value>) -> Self {
        let input_schema_json = ByteString::from(to_json(&input_schema));
        Self {
            description,
            input_schema_json: Arc::new(SchemaText::new(input_schema_json)),
            parsed_input: Arc::default(),
            validator: Arc::default(),
            ..self.clone()
        }
    }

    /// The input schema as JSON text (a reference to the buffer holding it, not a copy).
    pub fn input_schema_json(&self) -> ByteString {
        self.input_schema_json.get()
    }

    /// Holds the input schema's text in `same` (a slice of a buffer kept anyway, such as a
    /// revision's encoding) in place of the buffer it has, if the bytes are equal. Tells
    /// whether it moved. Every spec sharing the text (clones of this one) sees the move.
    pub fn move_input_schema_to(&self, same: &Bytes) -> bool {
        self.input_schema_json.move_to(same)
    }

    /// Copies the input schema's text into a buffer of its own if it lies in `buffer` (one
    /// this spec should not keep alive). Tells whether it copied.
    pub fn move_input_schema_out_of(&self, buffer: &[u8]) -> bool {
        self.input_schema_json.move_out_of(buffer)
    }

    /// The input schema (a JSON object), parsed on first use and kept.
    pub fn input_schema(&self) -> &Value {
        self.parsed_input
            .get_or_init(|| Value::Object(self.input_schema_copy()))
    }

    /// The parameters converted from the input schema, anew on each call. Not kept: they took
    /// about twice the room of the schema's text (24 MB for 10,000 tools), and only the
    /// revision's proto form and search index read them, once each.
    pub fn params(&self) -> Vec<Param> {
        match self.parsed_input.get() {
            Some(Value::Object(schema)) => params_from_schema(schema),
            _ => params_from_schema(&self.input_schema_copy()),
        }
    }

    /// A fresh copy of the input schema, parsed from its text and not kept (for reshaping,
    /// which should not leave every tool's tree behind).
    pub fn input_schema_copy(&self) -> Map<String, Value> {
        serde_json::from_str(&self.input_schema_json())
            .expect("the text was serialized from a JSON object")
    }

    /// Checks arguments against the input schema, naming each violation's path and rule. A
    /// schema the validator cannot compile lets everything through (the server still checks);
    /// `unusable` hears why, once, when that is first found.
    pub fn check_arguments(
        &self,
        arguments: &Map<String, Value>,
        unusable: impl FnOnce(&str),
    ) -> Result<(), String> {
        let mut compiled_now = false;
        let check = self.validator.get_or_init(|| {
            compiled_now = true;
            match jsonschema::validator_for(self.input_schema()) {
                Ok(validator) => SchemaCheck::Ready(Box::new(validator)),
                Err(error) => SchemaCheck::Unusable(error.to_string()),
            }
        });
        let validator = match check {
            SchemaCheck::Ready(validator) => validator,
            SchemaCheck::Unusable(why) => {
                if compiled_now {
                    unusable(why);
                }
                return Ok(());
            }
        };
        let instance = Value::Object(arguments.clone());
        let violations: Vec<String> = validator
            .iter_errors(&instance)
            .take(MAX_VIOLATIONS)
            .map(|error| {
                let at = error.instance_path().to_string();
                let at = if at.is_empty() {
                    "arguments".to_owned()
                } else {
                    format!("arguments{at}")
                };
                format!("{at}: {error}")
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the arguments do not match the tool's input schema: {}",
                violations.join("; ")
            ))
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
    /// What callers see of it: what the server declared, reshaped by the configuration.
    pub spec: Arc<ToolSpec>,
    /// Arguments the configuration fixes: always sent, never taken from callers.
    pub fixed: Arc<Map<String, Value>>,
}

/// JSON text of a schema object.
fn to_json(schema: &Map<String, Value>) -> String {
    serde_json::to_string(schema).expect("a map with string keys always serializes")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(schema: Value) -> ToolSpec {
        let Value::Object(schema) = schema else {
            panic!("object schema")
        };
        ToolSpec::new(
            ToolName::new("t"),
            String::new(),
            schema,
            None,
            Annotations::default(),
        )
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("object")
    }

    #[test]
    fn the_title_shown_is_the_tools_own_else_its_annotations() {
        let titled = |own: Option<&str>, annotated: Option<&str>| {
            let mut tool = spec(json!({"type": "object"}));
            tool.annotations.title = annotated.map(str::to_owned);
            tool.shown_as(own.map(str::to_owned), Icons::default())
        };
        let shown = |tool: &ToolSpec| tool.display_title().map(str::to_owned);
        assert_eq!(
            shown(&titled(Some("Own"), Some("Hint"))).as_deref(),
            Some("Own")
        );
        assert_eq!(shown(&titled(None, Some("Hint"))).as_deref(), Some("Hint"));
        assert_eq!(
            shown(&titled(Some(""), Some("Hint"))).as_deref(),
            Some("Hint")
        );
        assert_eq!(shown(&titled(Some("Own"), None)).as_deref(), Some("Own"));
        assert_eq!(shown(&titled(None, None)), None);
    }

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let tool = spec(json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a"],
            "additionalProperties": false
        }));
        let refuse = |value| {
            tool.check_arguments(&args(value), |_| panic!("compiles"))
                .unwrap_err()
        };
        assert!(refuse(json!({})).contains(r#"arguments: "a" is a required property"#));
        assert!(
            refuse(json!({"a": "two"})).contains(r#"arguments/a: "two" is not of type "integer""#)
        );
        let extra = refuse(json!({"a": 1, "c": true}));
        assert!(
            extra.contains("Additional properties are not allowed"),
            "{extra}"
        );
        assert!(
            tool.check_arguments(&args(json!({"a": 1, "b": "x"})), |_| {})
                .is_ok()
        );
    }

    #[test]
    fn a_schema_that_cannot_compile_lets_arguments_through_and_says_why_once() {
        let tool = spec(
            json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/remote.json"}}}),
        );
        let mut warnings = Vec::new();
        assert!(
            tool.check_arguments(&args(json!({"a": 1})), |why| warnings.push(why.to_owned()))
                .is_ok()
        );
        assert!(
            tool.check_arguments(&args(json!({"a": 2})), |why| warnings.push(why.to_owned()))
                .is_ok()
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }

    #[test]
    fn equality_ignores_the_compiled_validator() {
        let one = spec(json!({"type": "object"}));
        let two = spec(json!({"type": "object"}));
        one.check_arguments(&Map::new(), |_| {}).unwrap();
        assert_eq!(one, two);
    }
}
