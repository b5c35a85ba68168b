//! A tool as MCP's `tools/list` declares it, one way for both faces: as rmcp's [`Tool`]
//! ([`tool`]) and as JSON text written straight from the schema texts ([`write_json`], for
//! the HTTP face's listing of large catalogs), the two held equal by a test. Pure.
//!
//! The rules: the exposed name; the title shown ([`ToolSpec::display_title`](crate::domain::tool::ToolSpec::display_title): the tool's own,
//! else its annotations') as MCP's `title` (where clients since 2025-06-18 look), and the
//! annotations' own title, else that one, as `annotations.title` (where older ones look);
//! the description, absent when empty; the schemas exactly as the server sent them (an input
//! schema that is not an object, which MCP forbids, as `{"type":"object"}`); the hints; the
//! icons as given.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;

use super::{given, icon};
use crate::domain::{
    icon::Icon,
    tool::{Annotations, ExposedTool},
};

/// What MCP shows of one tool, borrowed from whichever form holds it.
#[derive(Debug, Clone, Copy)]
pub struct ToolFields<'a> {
    /// The exposed name.
    pub name: &'a str,
    /// What it does; empty for nothing said.
    pub description: &'a str,
    /// The input schema's JSON text, as its server sent it.
    pub input_schema: &'a str,
    /// The output schema's JSON text, if the server declared one.
    pub output_schema: Option<&'a str>,
    /// The title shown (see [`ToolSpec::display_title`](crate::domain::tool::ToolSpec::display_title)).
    pub title: Option<&'a str>,
    /// Its behaviour hints, with their own title.
    pub annotations: &'a Annotations,
    /// Its icons.
    pub icons: &'a [Icon],
}

impl<'a> ToolFields<'a> {
    /// The fields of a catalog tool whose input schema text is `input_schema` (the spec's,
    /// held by the caller: the spec hands out a counted reference, not a borrow).
    pub fn of(tool: &'a ExposedTool, input_schema: &'a str) -> Self {
        Self {
            name: tool.name.as_str(),
            description: &tool.spec.description,
            input_schema,
            output_schema: tool.spec.output_schema_json.as_deref(),
            title: tool.spec.display_title(),
            annotations: &tool.spec.annotations,
            icons: &tool.spec.icons,
        }
    }
}

/// The input schema of a tool whose own is not a JSON object.
const ANY_OBJECT: &str = r#"{"type":"object"}"#;

/// The tool as rmcp's [`Tool`].
pub fn tool(fields: &ToolFields<'_>) -> Tool {
    let input = object(fields.input_schema)
        .or_else(|| object(ANY_OBJECT))
        .unwrap_or_default();
    let description = given(Some(fields.description)).map(Into::into);
    let mut tool = Tool::new_with_raw(fields.name.to_owned(), description, Arc::new(input));
    tool.title = given(fields.title);
    tool.output_schema = fields.output_schema.and_then(object).map(Arc::new);
    tool.annotations = annotations(fields.annotations, fields.title);
    tool.icons = icon::icons(fields.icons);
    tool
}

/// `text` parsed, if it is a JSON object.
fn object(text: &str) -> Option<JsonObject> {
    match serde_json::from_str(text) {
        Ok(Value::Object(object)) => Some(object),
        _ => None,
    }
}

/// MCP's annotations of a tool with these `hints`, their title else the tool's `title`;
/// `None` when they say nothing.
fn annotations(hints: &Annotations, title: Option<&str>) -> Option<ToolAnnotations> {
    let annotations = ToolAnnotations::from_raw(
        given(hints.title.as_deref()).or_else(|| given(title)),
        hints.read_only,
        hints.destructive,
        hints.idempotent,
        hints.open_world,
    );
    (annotations != ToolAnnotations::default()).then_some(annotations)
}

/// Appends the tool's JSON to `out`, the schemas copied as text, in the order rmcp writes
/// [`tool`]'s fields. The texts are not parsed again: the broker's are JSON by construction
/// (serialized from parsed objects), so only whether one is an object is looked at.
pub fn write_json(out: &mut Vec<u8>, fields: &ToolFields<'_>) -> serde_json::Result<()> {
    out.extend_from_slice(br#"{"name":"#);
    serde_json::to_writer(&mut *out, fields.name)?;
    if let Some(title) = given(fields.title) {
        out.extend_from_slice(br#","title":"#);
        serde_json::to_writer(&mut *out, &title)?;
    }
    if !fields.description.is_empty() {
        out.extend_from_slice(br#","description":"#);
        serde_json::to_writer(&mut *out, fields.description)?;
    }
    out.extend_from_slice(br#","inputSchema":"#);
    let input = match is_object(fields.input_schema) {
        true => fields.input_schema,
        false => ANY_OBJECT,
    };
    out.extend_from_slice(input.as_bytes());
    if let Some(output) = fields.output_schema.filter(|text| is_object(text)) {
        out.extend_from_slice(br#","outputSchema":"#);
        out.extend_from_slice(output.as_bytes());
    }
    if let Some(annotations) = annotations(fields.annotations, fields.title) {
        out.extend_from_slice(br#","annotations":"#);
        serde_json::to_writer(&mut *out, &annotations)?;
    }
    if let Some(icons) = icon::icons(fields.icons) {
        out.extend_from_slice(br#","icons":"#);
        serde_json::to_writer(&mut *out, &icons)?;
    }
    out.push(b'}');
    Ok(())
}

/// Whether JSON `text` is an object.
fn is_object(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fields<'a>(
        description: &'a str,
        input_schema: &'a str,
        output_schema: Option<&'a str>,
        annotations: &'a Annotations,
    ) -> ToolFields<'a> {
        ToolFields {
            name: "d_stats",
            description,
            input_schema,
            output_schema,
            title: annotations.title.as_deref(),
            annotations,
            icons: &[],
        }
    }

    const INPUT: &str = r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#;
    const OUTPUT: &str = r#"{"type":"object","properties":{"mean":{"type":"number"}}}"#;

    /// (what the broker holds, what MCP is shown).
    fn cases() -> Vec<(ToolFields<'static>, Value)> {
        let hints: &'static Annotations = Box::leak(Box::new(Annotations {
            title: Some("Statistics".into()),
            read_only: Some(true),
            idempotent: Some(false),
            ..Annotations::default()
        }));
        let bare: &'static Annotations = Box::leak(Box::default());
        let empty_title: &'static Annotations = Box::leak(Box::new(Annotations {
            title: Some(String::new()),
            ..Annotations::default()
        }));
        let input = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        vec![
            (
                fields("Computes statistics.", INPUT, Some(OUTPUT), hints),
                json!({
                    "name": "d_stats",
                    "title": "Statistics",
                    "description": "Computes statistics.",
                    "inputSchema": input,
                    "outputSchema": {"type": "object", "properties": {"mean": {"type": "number"}}},
                    "annotations": {"title": "Statistics", "readOnlyHint": true,
                                    "idempotentHint": false},
                }),
            ),
            (
                fields("", INPUT, None, bare),
                json!({"name": "d_stats", "inputSchema": input}),
            ),
            (
                fields("", "[1]", Some("\"text\""), empty_title),
                json!({"name": "d_stats", "inputSchema": {"type": "object"}}),
            ),
            (
                ToolFields {
                    title: Some("Stats, its own title"),
                    icons: Box::leak(Box::new([Icon {
                        src: "https://example.com/stats.png".into(),
                        sizes: vec!["any".into()],
                        ..Icon::default()
                    }])),
                    ..fields("", INPUT, None, hints)
                },
                json!({
                    "name": "d_stats",
                    "title": "Stats, its own title",
                    "inputSchema": input,
                    "annotations": {"title": "Statistics", "readOnlyHint": true,
                                    "idempotentHint": false},
                    "icons": [{"src": "https://example.com/stats.png", "sizes": ["any"]}],
                }),
            ),
            (
                ToolFields {
                    title: Some("Only its own"),
                    ..fields("", INPUT, None, bare)
                },
                json!({"name": "d_stats", "title": "Only its own", "inputSchema": input,
                       "annotations": {"title": "Only its own"}}),
            ),
        ]
    }

    #[test]
    fn a_tool_shows_its_one_title_twice_raw_schemas_and_only_what_it_has() {
        for (fields, shown) in cases() {
            assert_eq!(serde_json::to_value(tool(&fields)).unwrap(), shown);
        }
    }

    #[test]
    fn the_written_json_is_rmcps_to_the_byte() {
        for (fields, _) in cases() {
            let mut written = Vec::new();
            write_json(&mut written, &fields).unwrap();
            let serialized = serde_json::to_vec(&tool(&fields)).unwrap();
            assert_eq!(
                String::from_utf8(written).unwrap(),
                String::from_utf8(serialized).unwrap()
            );
        }
    }
}
