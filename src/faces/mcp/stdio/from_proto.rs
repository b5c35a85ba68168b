//! The broker's proto messages as MCP's (and the few MCP answers that go back), and gRPC
//! failures as refusals: tools, resources and prompts become the domain's forms, which
//! [`mcp_model`](crate::faces::mcp::model) shows as the HTTP face shows them. Pure: no I/O, so every
//! rule here is unit-tested.

// Logging is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "logging is what clients before MCP 2026-07-28 use"
)]

use std::collections::HashMap;

use base64::{Engine, engine::general_purpose::STANDARD as BASE64};
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction,
    GetPromptResult, JsonObject, LoggingLevel, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProgressToken, Prompt, PromptMessage, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, Role, Tool,
};
use serde_json::{Value, json};

use crate::{
    domain::{
        icon::{Icon, Icons},
        offer::{PromptArgumentSpec, PromptSpec, ResourceSpec, TemplateSpec},
        request_error::Code,
        tool::Annotations,
    },
    faces::mcp::lists::Stale,
    faces::mcp::model::{self, refusal::Refusal, tool::ToolFields},
    proto::json::json_to_struct,
    proto::{self, content::Kind, embedded_resource, resource_contents, watch_event::Event},
};

/// Empty proto strings are MCP's absent fields.
fn given(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// A broker tool as MCP declares it (see [`mcp_model::tool`]).
pub fn tool(tool: &proto::Tool) -> Tool {
    let annotations = tool.annotations.as_ref().map(hints).unwrap_or_default();
    model::tool::tool(&ToolFields {
        name: &tool.name,
        description: &tool.description,
        input_schema: &tool.input_schema_json,
        output_schema: Some(tool.output_schema_json.as_str()).filter(|text| !text.is_empty()),
        // A broker before `Tool.title` sent only the annotations' title.
        title: Some(tool.title.as_str())
            .filter(|title| !title.is_empty())
            .or(annotations.title.as_deref()),
        annotations: &annotations,
        icons: &icons(tool.icons.clone()),
    })
}

/// The broker's icons as the domain holds them.
fn icons(icons: Vec<proto::Icon>) -> Icons {
    icons
        .into_iter()
        .map(|icon| Icon {
            src: icon.src,
            mime_type: given(icon.mime_type),
            sizes: icon.sizes,
            theme: given(icon.theme),
        })
        .collect()
}

/// The broker's annotations of a tool as the domain holds them.
fn hints(annotations: &proto::ToolAnnotations) -> Annotations {
    Annotations {
        title: given(annotations.title.clone()),
        read_only: annotations.read_only_hint,
        destructive: annotations.destructive_hint,
        idempotent: annotations.idempotent_hint,
        open_world: annotations.open_world_hint,
    }
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

/// A failed gRPC request as the refusal both faces map (see [`mcp_model::refusal`]): the
/// broker's own statuses keep their code and message; any other (the connection to the
/// broker failed, or something on the way answered) says so.
pub fn refusal(status: &tonic::Status) -> Refusal {
    let code = match status.code() {
        tonic::Code::NotFound => Some(Code::NotFound),
        tonic::Code::InvalidArgument => Some(Code::InvalidArgument),
        tonic::Code::Unavailable => Some(Code::Unavailable),
        tonic::Code::DeadlineExceeded => Some(Code::DeadlineExceeded),
        tonic::Code::Internal => Some(Code::Internal),
        tonic::Code::ResourceExhausted => Some(Code::ResourceExhausted),
        tonic::Code::Unauthenticated => Some(Code::Unauthenticated),
        tonic::Code::PermissionDenied => Some(Code::PermissionDenied),
        tonic::Code::FailedPrecondition => Some(Code::FailedPrecondition),
        tonic::Code::Ok
        | tonic::Code::Cancelled
        | tonic::Code::Unknown
        | tonic::Code::AlreadyExists
        | tonic::Code::Aborted
        | tonic::Code::OutOfRange
        | tonic::Code::Unimplemented
        | tonic::Code::DataLoss => None,
    };
    let message = match code {
        Some(_) => status.message().to_owned(),
        None => format!(
            "no answer from the broker ({:?}): {}",
            status.code(),
            status.message()
        ),
    };
    Refusal { code, message }
}

/// A listed resource as MCP's (see [`mcp_model::resource`]).
pub fn resource(resource: proto::Resource) -> Resource {
    model::resource::resource(&ResourceSpec {
        uri: resource.uri,
        name: resource.name,
        title: given(resource.title),
        description: given(resource.description),
        mime_type: given(resource.mime_type),
        size: resource.size,
        icons: icons(resource.icons),
    })
}

/// A listed resource template as MCP's (see [`mcp_model::resource`]).
pub fn template(template: proto::ResourceTemplate) -> ResourceTemplate {
    model::resource::template(&TemplateSpec {
        uri_template: template.uri_template,
        name: template.name,
        title: given(template.title),
        description: given(template.description),
        mime_type: given(template.mime_type),
        icons: icons(template.icons),
    })
}

/// The server that reads `uri`, of those `listed` (see [`mcp_model::resource::owner`]).
pub fn owner<'a>(listed: &'a proto::ListResourcesResponse, uri: &str) -> Option<&'a str> {
    let resources = (listed.resources.iter()).map(|r| (r.server.as_str(), r.uri.as_str()));
    let templates = (listed.templates.iter()).map(|t| (t.server.as_str(), t.uri_template.as_str()));
    model::resource::owner(resources, templates, uri)
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

/// A listed prompt as MCP's (see [`mcp_model::prompt`]).
pub fn prompt(prompt: proto::Prompt) -> Prompt {
    let arguments = prompt
        .arguments
        .into_iter()
        .map(|argument| PromptArgumentSpec {
            name: argument.name,
            description: given(argument.description),
            required: argument.required,
        });
    let spec = PromptSpec {
        original: prompt.original_name,
        title: given(prompt.title),
        description: given(prompt.description),
        arguments: arguments.collect(),
        icons: icons(prompt.icons),
    };
    model::prompt::prompt(&prompt.name, &spec)
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
        "url" => json!({
            "mode": "url",
            "message": question.message,
            "url": question.url,
            // The server's own; a broker before `elicitation_id` sent none: the question's id
            // is as unique.
            "elicitationId": match question.elicitation_id.as_str() {
                "" => &question.id,
                given => given,
            },
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
mod tests;
