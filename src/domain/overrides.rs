//! How the configuration reshapes one server's tool: its exposed name (`as`), its description,
//! and arguments fixed by the operator, which disappear from the schema callers see and are
//! always sent. Pure.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::tool::ToolSpec;

/// One entry of a server's `tools` list: a tool to expose, and how it is reshaped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolRule {
    /// The tool's name on its server.
    pub name: String,
    /// Exposed as prefix + this instead of prefix + `name`.
    pub rename: Option<String>,
    /// Replaces the server's description.
    pub description: Option<String>,
    /// Always sent with these values; callers may not send them.
    pub arguments: Arc<Map<String, Value>>,
}

impl ToolRule {
    /// A plain entry: the tool exposed as its server declares it.
    pub fn plain(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// Whether the rule changes how the tool looks (beyond allowing it).
    pub fn reshapes(&self) -> bool {
        self.description.is_some() || !self.arguments.is_empty()
    }

    /// The name to put after the prefix.
    pub fn exposed_suffix(&self) -> &str {
        self.rename.as_deref().unwrap_or(&self.name)
    }

    /// The tool as callers see it: the description replaced, fixed arguments taken out of the
    /// input schema's `properties` and `required` (so out of the parameters too).
    pub fn reshape(&self, spec: &ToolSpec) -> ToolSpec {
        let description = self.description.as_deref().unwrap_or(&spec.description);
        if self.arguments.is_empty() {
            return spec.with_description(description.to_owned());
        }
        let mut schema = spec.input_schema_copy();
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            properties.retain(|name, _| !self.arguments.contains_key(name));
        }
        if let Some(Value::Array(required)) = schema.get_mut("required") {
            required.retain(|name| {
                name.as_str()
                    .is_none_or(|name| !self.arguments.contains_key(name))
            });
        }
        spec.with_input(description.to_owned(), schema)
    }

    /// Fixed arguments the server's schema does not declare: sent anyway, but worth a warning.
    pub fn undeclared_arguments(&self, spec: &ToolSpec) -> Vec<&str> {
        if self.arguments.is_empty() {
            return Vec::new();
        }
        let schema = spec.input_schema_copy();
        let declared = schema.get("properties").and_then(Value::as_object);
        self.arguments
            .keys()
            .filter(|name| declared.is_none_or(|properties| !properties.contains_key(*name)))
            .map(String::as_str)
            .collect()
    }
}

/// Why a caller's arguments are refused when they include arguments the configuration fixes
/// (naming them); empty when they include none.
pub fn fixed_sent(arguments: &Map<String, Value>, fixed: &Map<String, Value>) -> String {
    let sent: Vec<String> = fixed
        .keys()
        .filter(|name| arguments.contains_key(*name))
        .map(|name| format!("{name:?}"))
        .collect();
    if sent.is_empty() {
        return String::new();
    }
    format!(
        "argument(s) {} are fixed by the broker's configuration for this tool; leave them out",
        sent.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::{names::ToolName, tool::Annotations};

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("object")
    }

    fn search_code() -> ToolSpec {
        ToolSpec::new(
            ToolName::new("search_code"),
            "Search code.".into(),
            object(json!({
                "type": "object",
                "properties": {
                    "org": {"type": "string", "description": "Organisation"},
                    "query": {"type": "string"}
                },
                "required": ["org", "query"],
                "additionalProperties": false
            })),
            None,
            Annotations::default(),
        )
    }

    fn pinned() -> ToolRule {
        ToolRule {
            name: "search_code".into(),
            rename: Some("code_search".into()),
            description: Some("Search code in acme.".into()),
            arguments: Arc::new(object(json!({"org": "acme"}))),
        }
    }

    #[test]
    fn fixed_arguments_leave_the_schema_and_the_params() {
        let shaped = pinned().reshape(&search_code());
        assert_eq!(shaped.description, "Search code in acme.");
        assert_eq!(
            shaped.input_schema().clone(),
            json!({
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
                "additionalProperties": false
            })
        );
        let params: Vec<String> = shaped.params().into_iter().map(|p| p.name).collect();
        assert_eq!(params, ["query"]);
        assert!(!shaped.input_schema_json().contains("org"));
        assert_eq!(shaped.original.as_str(), "search_code");
    }

    #[test]
    fn a_description_alone_keeps_the_schema() {
        let rule = ToolRule {
            description: Some("Better.".into()),
            ..ToolRule::plain("search_code")
        };
        let spec = search_code();
        let shaped = rule.reshape(&spec);
        assert_eq!(shaped.description, "Better.");
        assert_eq!(shaped.input_schema(), spec.input_schema());
        assert!(rule.reshapes() && !ToolRule::plain("x").reshapes());
    }

    #[test]
    fn a_caller_may_not_send_a_fixed_argument() {
        let rule = pinned();
        let sent = object(json!({"query": "fn main", "org": "evil"}));
        let refused = fixed_sent(&sent, &rule.arguments);
        assert!(
            refused.contains("\"org\"") && refused.contains("fixed"),
            "{refused}"
        );
        assert_eq!(
            fixed_sent(&object(json!({"query": "x"})), &rule.arguments),
            ""
        );
    }

    #[test]
    fn undeclared_fixed_arguments_are_named() {
        let rule = ToolRule {
            arguments: Arc::new(object(json!({"org": "acme", "region": "eu"}))),
            ..ToolRule::plain("search_code")
        };
        assert_eq!(rule.undeclared_arguments(&search_code()), ["region"]);
    }
}
