//! The broker's catalog entries as MCP declares them: tools (exposed names, raw schemas,
//! annotations), resources, templates and prompts. Pure.

use std::sync::Arc;

use rmcp::model::{Prompt, PromptArgument, Resource, ResourceTemplate, Tool, ToolAnnotations};
use serde_json::Value;

use crate::domain::{
    offer::{ExposedPrompt, ResourceSpec, TemplateSpec},
    tool::{Annotations, ExposedTool},
};

/// An exposed tool: its exposed name, its schemas exactly as its server sent them, its hints.
pub fn tool(exposed: &ExposedTool) -> Tool {
    let spec = &exposed.spec;
    // Parsed from the text, not through `input_schema()`: the face's list keeps its own
    // (`tool_list`), which would otherwise be held twice.
    let schema = match serde_json::from_str(&spec.input_schema_json()) {
        Ok(Value::Object(object)) => object,
        _ => Default::default(),
    };
    let mut tool = Tool::new(
        exposed.name.to_string(),
        spec.description.clone(),
        Arc::new(schema),
    );
    if let Some(Ok(Value::Object(output))) = spec
        .output_schema_json
        .as_deref()
        .map(serde_json::from_str::<Value>)
    {
        tool.output_schema = Some(Arc::new(output));
    }
    tool.annotations = tool_annotations(&spec.annotations);
    tool
}

/// MCP's annotations of a tool with `hints`; `None` when they say nothing.
pub fn tool_annotations(hints: &Annotations) -> Option<ToolAnnotations> {
    annotations(
        hints.title.clone(),
        [
            hints.read_only,
            hints.destructive,
            hints.idempotent,
            hints.open_world,
        ],
    )
}

/// MCP's tool annotations from a title and the read-only, destructive, idempotent and
/// open-world hints; `None` when they say nothing.
pub fn annotations(title: Option<String>, hints: [Option<bool>; 4]) -> Option<ToolAnnotations> {
    let [read_only, destructive, idempotent, open_world] = hints;
    let mut annotations = ToolAnnotations::default();
    annotations.title = title;
    annotations.read_only_hint = read_only;
    annotations.destructive_hint = destructive;
    annotations.idempotent_hint = idempotent;
    annotations.open_world_hint = open_world;
    (annotations != ToolAnnotations::default()).then_some(annotations)
}

/// A listed resource.
pub fn resource(spec: &ResourceSpec) -> Resource {
    let mut resource = Resource::new(spec.uri.clone(), spec.name.clone());
    resource.title = spec.title.clone();
    resource.description = spec.description.clone();
    resource.mime_type = spec.mime_type.clone();
    resource.size = spec.size;
    resource
}

/// A listed resource template.
pub fn template(spec: &TemplateSpec) -> ResourceTemplate {
    let mut template = ResourceTemplate::new(spec.uri_template.clone(), spec.name.clone());
    template.title = spec.title.clone();
    template.description = spec.description.clone();
    template.mime_type = spec.mime_type.clone();
    template
}

/// A prompt, by its exposed name.
pub fn prompt(prompt: &ExposedPrompt) -> Prompt {
    let arguments = prompt
        .spec
        .arguments
        .iter()
        .map(|argument| {
            let mut out =
                PromptArgument::new(argument.name.clone()).with_required(argument.required);
            out.description = argument.description.clone();
            out
        })
        .collect();
    let mut out = Prompt::new(
        prompt.name.clone(),
        prompt.spec.description.clone(),
        Some(arguments),
    );
    out.title = prompt.spec.title.clone();
    out
}
