//! The broker's proto messages as MCP's (and the few MCP answers that go back), and how gRPC
//! failures read in MCP. Pure: no I/O, so every rule here is unit-tested.

// Logging is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "logging is what clients before MCP 2026-07-28 use"
)]

use std::{collections::HashMap, sync::Arc};

use base64::{Engine, engine::general_purpose::STANDARD as BASE64};
use rmcp::{
    ErrorData,
    model::{
        CallToolResult, ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction,
        GetPromptResult, JsonObject, LoggingLevel, LoggingMessageNotificationParam,
        ProgressNotificationParam, ProgressToken, Prompt, PromptArgument, PromptMessage,
        ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role, Tool,
    },
};
use serde_json::{Map, Value, json};
use tonic::Code;

use crate::{
    domain::uri_template,
    grpc::convert::json_to_struct,
    mcp_lists::Stale,
    proto::{self, content::Kind, embedded_resource, resource_contents, watch_event::Event},
};

/// Empty proto strings are MCP's absent fields.
fn given(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// A broker tool as MCP declares it: exposed name, the raw schemas, the hints.
pub fn tool(tool: proto::Tool) -> Tool {
    // The schema is the upstream server's, which MCP requires to be an object; a broker that
    // somehow sent something else still yields a callable tool.
    let input = match serde_json::from_str(&tool.input_schema_json) {
        Ok(Value::Object(schema)) => schema,
        _ => Map::from_iter([("type".to_owned(), Value::from("object"))]),
    };
    let mut out = Tool::new_with_raw(
        tool.name,
        given(tool.description).map(Into::into),
        Arc::new(input),
    );
    if let Ok(Value::Object(output)) = serde_json::from_str(&tool.output_schema_json) {
        out.output_schema = Some(Arc::new(output));
    }
    if let Some(hints) = tool.annotations {
        // The broker folded MCP's `title` into the annotations' title; both get it back.
        out.title = given(hints.title.clone());
        out.annotations = crate::mcp_face::convert::annotations(
            given(hints.title),
            [
                hints.read_only_hint,
                hints.destructive_hint,
                hints.idempotent_hint,
                hints.open_world_hint,
            ],
        );
    }
    out
}

/// One content block of a result or prompt message, as MCP's (binary data base64 again).
pub fn content(content: proto::Content) -> Option<ContentBlock> {
    Some(match content.kind? {
        Kind::Text(text) => ContentBlock::text(text.text),
        Kind::Image(image) => ContentBlock::image(BASE64.encode(image.data), image.mime_type),
        Kind::Audio(audio) => ContentBlock::audio(BASE64.encode(audio.data), audio.mime_type),
        Kind::Resource(resource) => {
            let mime_type = given(resource.mime_type);
            let contents = match resource.contents {
                Some(embedded_resource::Contents::Blob(blob)) => {
                    ResourceContents::BlobResourceContents {
                        uri: resource.uri,
                        mime_type,
                        blob: BASE64.encode(blob),
                        meta: None,
                    }
                }
                Some(embedded_resource::Contents::Text(text)) => {
                    text_contents(resource.uri, mime_type, text)
                }
                None => text_contents(resource.uri, mime_type, String::new()),
            };
            ContentBlock::resource(contents)
        }
        Kind::ResourceLink(link) => {
            let mut resource = Resource::new(link.uri, link.name);
            resource.title = given(link.title);
            resource.description = given(link.description);
            resource.mime_type = given(link.mime_type);
            resource.size = link.size;
            ContentBlock::resource_link(resource)
        }
    })
}

fn text_contents(uri: String, mime_type: Option<String>, text: String) -> ResourceContents {
    ResourceContents::TextResourceContents {
        uri,
        mime_type,
        text,
        meta: None,
    }
}

/// The broker's tool result as MCP's; the structured content is the JSON the broker carried as
/// text.
pub fn call_result(response: proto::CallToolResponse) -> Result<CallToolResult, String> {
    let blocks = response.content.into_iter().filter_map(content).collect();
    let mut result = match response.is_error {
        true => CallToolResult::error(blocks),
        false => CallToolResult::success(blocks),
    };
    if !response.structured_content_json.is_empty() {
        let structured = serde_json::from_str(&response.structured_content_json)
            .map_err(|e| format!("the broker's structured content is not JSON: {e}"))?;
        result.structured_content = Some(structured);
    }
    Ok(result)
}

/// A progress event of a call, under the token the MCP client gave.
pub fn progress(token: ProgressToken, progress: proto::Progress) -> ProgressNotificationParam {
    let mut out = ProgressNotificationParam::new(token, progress.progress);
    out.total = progress.total;
    out.message = given(progress.message);
    out
}

/// A server's log message during a call, as MCP's; data that is not JSON is kept as a string,
/// a level MCP does not name is `info`.
pub fn log_message(log: proto::LogMessage) -> LoggingMessageNotificationParam {
    let level = serde_json::from_value(Value::String(log.level)).unwrap_or(LoggingLevel::Info);
    let data = serde_json::from_str(&log.data_json).unwrap_or(Value::String(log.data_json));
    let mut out = LoggingMessageNotificationParam::new(level, data);
    out.logger = given(log.logger);
    out
}

/// A level's severity, for comparing levels: debug is 0, emergency 7.
pub fn severity(level: LoggingLevel) -> u8 {
    level as u8
}

/// What a failed gRPC call becomes for `tools/call`: a bad name or arguments are the request's
/// fault (invalid params, as an MCP server answers them); refusals, limits, an unreachable
/// server, timeouts and a missing login are a tool result with `isError`, because MCP clients
/// show protocol errors to no one while the model reads a tool error and can wait, retry or
/// choose another tool. What is left (an upstream's JSON-RPC error, a broker fault) stays the
/// internal error it was.
pub fn call_failure(code: Code, message: &str) -> Result<CallToolResult, ErrorData> {
    match code {
        Code::NotFound | Code::InvalidArgument => {
            Err(ErrorData::invalid_params(message.to_owned(), None))
        }
        Code::PermissionDenied
        | Code::Unauthenticated
        | Code::ResourceExhausted
        | Code::Unavailable
        | Code::DeadlineExceeded
        | Code::FailedPrecondition => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "the broker did not run the tool ({code:?}): {message}"
        ))])),
        _ => Err(ErrorData::internal_error(
            format!("the broker failed ({code:?}): {message}"),
            None,
        )),
    }
}

/// What a failed gRPC call becomes for the other requests (lists, reads, prompts).
pub fn request_failure(code: Code, message: &str) -> ErrorData {
    match code {
        Code::NotFound | Code::InvalidArgument => {
            ErrorData::invalid_params(message.to_owned(), None)
        }
        _ => ErrorData::internal_error(format!("the broker failed ({code:?}): {message}"), None),
    }
}

/// A listed resource as MCP's.
pub fn resource(resource: proto::Resource) -> Resource {
    let mut out = Resource::new(resource.uri, resource.name);
    out.title = given(resource.title);
    out.description = given(resource.description);
    out.mime_type = given(resource.mime_type);
    out.size = resource.size;
    out
}

/// A listed resource template as MCP's.
pub fn template(template: proto::ResourceTemplate) -> ResourceTemplate {
    let mut out = ResourceTemplate::new(template.uri_template, template.name);
    out.title = given(template.title);
    out.description = given(template.description);
    out.mime_type = given(template.mime_type);
    out
}

/// The server that can read `uri`: the one listing it, else one with a template it begins with
/// the literal start of (up to the first expression), those it wholly matches first, then the
/// longest such start.
pub fn owner<'a>(listed: &'a proto::ListResourcesResponse, uri: &str) -> Option<&'a str> {
    if let Some(resource) = listed.resources.iter().find(|r| r.uri == uri) {
        return Some(&resource.server);
    }
    listed
        .templates
        .iter()
        .filter_map(|template| {
            let prefix = template.uri_template.split('{').next().unwrap_or_default();
            let matches = uri_template::matches(&template.uri_template, uri);
            uri.starts_with(prefix)
                .then_some(((matches, prefix.len()), &template.server))
        })
        .max_by_key(|(rank, _)| *rank)
        .map(|(_, server)| server.as_str())
}

/// A resource's contents as MCP's: text as text, bytes as base64.
pub fn read_result(response: proto::ReadResourceResponse) -> ReadResourceResult {
    let contents = response
        .contents
        .into_iter()
        .map(|contents| {
            let mime_type = given(contents.mime_type);
            match contents.contents {
                Some(resource_contents::Contents::Blob(blob)) => {
                    ResourceContents::BlobResourceContents {
                        uri: contents.uri,
                        mime_type,
                        blob: BASE64.encode(blob),
                        meta: None,
                    }
                }
                Some(resource_contents::Contents::Text(text)) => {
                    text_contents(contents.uri, mime_type, text)
                }
                None => text_contents(contents.uri, mime_type, String::new()),
            }
        })
        .collect();
    ReadResourceResult::new(contents)
}

/// A listed prompt as MCP's.
pub fn prompt(prompt: proto::Prompt) -> Prompt {
    let arguments: Vec<PromptArgument> = prompt
        .arguments
        .into_iter()
        .map(|argument| {
            let mut out = PromptArgument::new(argument.name).with_required(argument.required);
            out.description = given(argument.description);
            out
        })
        .collect();
    let mut out = Prompt::new(
        prompt.name,
        given(prompt.description),
        (!arguments.is_empty()).then_some(arguments),
    );
    out.title = given(prompt.title);
    out
}

/// MCP's prompt arguments as the broker takes them: strings as they are, anything else as
/// JSON text.
pub fn prompt_arguments(arguments: Option<JsonObject>) -> HashMap<String, String> {
    arguments
        .unwrap_or_default()
        .into_iter()
        .map(|(name, value)| match value {
            Value::String(text) => (name, text),
            other => (name, other.to_string()),
        })
        .collect()
}

/// A filled-in prompt as MCP's.
pub fn prompt_result(response: proto::GetPromptResponse) -> Result<GetPromptResult, String> {
    let messages = response
        .messages
        .into_iter()
        .map(|message| {
            let role = match message.role.as_str() {
                "assistant" => Role::Assistant,
                _ => Role::User,
            };
            let block = message
                .content
                .and_then(content)
                .ok_or("a prompt message without content")?;
            Ok(PromptMessage::new(role, block))
        })
        .collect::<Result<_, String>>()?;
    let mut result = GetPromptResult::new(messages);
    result.description = given(response.description);
    Ok(result)
}

/// The broker's question as MCP's `elicitation/create` params; `None` for a mode MCP (or this
/// build) does not know, or a schema MCP would not accept, which are declined.
pub fn elicit_params(question: &proto::ElicitationRequest) -> Option<ElicitRequestParams> {
    let params = match question.mode.as_str() {
        "form" => json!({
            "mode": "form",
            "message": question.message,
            "requestedSchema": serde_json::from_str::<Value>(&question.requested_schema_json).ok()?,
        }),
        // The upstream's elicitation id is not carried by the broker; ours is as unique.
        "url" => json!({
            "mode": "url",
            "message": question.message,
            "url": question.url,
            "elicitationId": question.id,
        }),
        _ => return None,
    };
    serde_json::from_value(params).ok()
}

/// The MCP client's answer to a question, for the broker.
pub fn elicitation_response(id: String, answer: ElicitResult) -> proto::ElicitationResponse {
    let action = match answer.action {
        ElicitationAction::Accept => "accept",
        ElicitationAction::Cancel => "cancel",
        _ => "decline",
    };
    let content = match (&answer.action, answer.content) {
        (ElicitationAction::Accept, Some(Value::Object(content))) => Some(json_to_struct(&content)),
        _ => None,
    };
    proto::ElicitationResponse {
        id,
        action: action.into(),
        content,
    }
}

/// Which of the MCP client's lists a Watch event makes stale. A snapshot in mid-stream replaces
/// events the broker dropped for a slow watcher, whatever they were; a server's state alone
/// changes no list (its tools, resources and prompts come and go with events of their own).
pub fn stale_by(event: &Event) -> Stale {
    match event {
        Event::Snapshot(_) => Stale::ALL,
        Event::ToolsChanged(_) => Stale {
            tools: true,
            ..Stale::default()
        },
        Event::ResourcesChanged(_) => Stale {
            resources: true,
            ..Stale::default()
        },
        Event::PromptsChanged(_) => Stale {
            prompts: true,
            ..Stale::default()
        },
        Event::ServerStatus(_) => Stale::default(),
    }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
