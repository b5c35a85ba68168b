//! Conversions between the broker's types and the proto messages. Pure.

use std::time::{Duration, SystemTime};

use base64::{Engine, engine::general_purpose::STANDARD};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use crate::{
    domain::{
        catalog::{Change, Event, ServerView, ToolsChange},
        icon::Icon,
        names::ServerName,
        request_error::RequestError,
        schema::Param,
        state::ServerState,
        tool::{Annotations, ExposedTool},
    },
    proto::{self, content::Kind, embedded_resource::Contents},
};

/// A tool as the proto describes it.
pub fn tool(tool: &ExposedTool) -> proto::Tool {
    let spec = &tool.spec;
    proto::Tool {
        name: tool.name.to_string(),
        description: spec.description.clone(),
        params: spec.params().into_iter().map(param).collect(),
        input_schema_json: spec.input_schema_json().to_string(),
        output_schema_json: spec
            .output_schema_json
            .as_deref()
            .unwrap_or_default()
            .to_owned(),
        server: tool.server.to_string(),
        original_name: spec.original.to_string(),
        annotations: Some(annotations(&spec.annotations)),
        title: spec.display_title().unwrap_or_default().to_owned(),
        icons: icons(&spec.icons),
    }
}

/// Icons as the proto describes them.
pub fn icons(icons: &[Icon]) -> Vec<proto::Icon> {
    icons
        .iter()
        .map(|icon| proto::Icon {
            src: icon.src.clone(),
            mime_type: icon.mime_type.clone().unwrap_or_default(),
            sizes: icon.sizes.clone(),
            theme: icon.theme.clone().unwrap_or_default(),
        })
        .collect()
}

fn param(param: Param) -> proto::Param {
    proto::Param {
        name: param.name,
        r#type: param.r#type,
        description: param.description,
        required: param.required,
        enum_values: param.enum_values,
        items: param
            .items
            .map(|p| Box::new(crate::faces::grpc::messages::param(*p))),
        properties: param
            .properties
            .into_iter()
            .map(crate::faces::grpc::messages::param)
            .collect(),
        default_json: param.default_json,
    }
}

fn annotations(a: &Annotations) -> proto::ToolAnnotations {
    proto::ToolAnnotations {
        title: a.title.clone().unwrap_or_default(),
        read_only_hint: a.read_only,
        destructive_hint: a.destructive,
        idempotent_hint: a.idempotent,
        open_world_hint: a.open_world,
    }
}

/// A server's status as the proto describes it; `sessions` is its per-caller sessions alive,
/// `kept` where its rates and tokens are kept (added to the message).
pub fn server_status(
    view: &ServerView,
    sessions: usize,
    kept: Option<&String>,
) -> proto::ServerStatus {
    let condition = &view.condition;
    let message = match kept {
        None => view.message.clone(),
        Some(kept) if view.message.is_empty() => kept.clone(),
        Some(kept) => format!("{}; {kept}", view.message),
    };
    proto::ServerStatus {
        name: view.name.to_string(),
        state: server_state(condition.state).into(),
        message,
        transport: condition.transport.as_str().into(),
        tool_count: view.tool_count,
        restarts: condition.restarts,
        since: Some(timestamp(condition.since)),
        sessions: u32::try_from(sessions).unwrap_or(u32::MAX),
        protocol_version: condition.protocol.clone().unwrap_or_default(),
        icons: icons(&condition.icons),
    }
}

fn server_state(state: ServerState) -> proto::ServerState {
    match state {
        ServerState::Connecting => proto::ServerState::Connecting,
        ServerState::Ready => proto::ServerState::Ready,
        ServerState::Reconnecting => proto::ServerState::Reconnecting,
        ServerState::Failed => proto::ServerState::Failed,
        ServerState::Stopped => proto::ServerState::Stopped,
    }
}

fn timestamp(time: SystemTime) -> prost_types::Timestamp {
    let since_epoch = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    prost_types::Timestamp {
        seconds: i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0),
    }
}

/// A catalog event as a Watch event (none for a `Views` event, which streams act on); `kept`
/// says where a server's rates and tokens are kept.
pub fn watch_event(event: &Event, kept: Option<&String>) -> proto::WatchEvent {
    let event_kind = match &event.change {
        Change::Views => None,
        Change::Tools(server, change) => Some(proto::watch_event::Event::ToolsChanged(
            tools_changed(server, change),
        )),
        Change::Server(view) => Some(proto::watch_event::Event::ServerStatus(server_status(
            view, 0, kept,
        ))),
        Change::Resources(server) => Some(proto::watch_event::Event::ResourcesChanged(
            proto::ResourcesChanged {
                server: server.to_string(),
            },
        )),
        Change::Prompts(server) => Some(proto::watch_event::Event::PromptsChanged(
            proto::PromptsChanged {
                server: server.to_string(),
            },
        )),
    };
    proto::WatchEvent {
        revision: event.revision,
        event: event_kind,
    }
}

fn tools_changed(server: &ServerName, change: &ToolsChange) -> proto::ToolsChanged {
    proto::ToolsChanged {
        server: server.to_string(),
        added: change.added.iter().map(|t| tool(t)).collect(),
        updated: change.updated.iter().map(|t| tool(t)).collect(),
        removed: change.removed.iter().map(|n| n.to_string()).collect(),
    }
}

/// A proto Duration as a std one; negative durations are the caller's mistake.
pub fn duration(d: prost_types::Duration) -> Result<Duration, RequestError> {
    Duration::try_from(d)
        .map_err(|_| RequestError::InvalidArguments("timeout must not be negative".into()))
}

/// A tool result as the proto response: content blocks in order, text parts joined.
pub fn call_response(
    server: &ServerName,
    result: CallToolResult,
) -> Result<proto::CallToolResponse, RequestError> {
    let bad = |reason: String| RequestError::BadResult {
        server: server.clone(),
        reason,
    };
    let mut texts = Vec::new();
    let mut content = Vec::with_capacity(result.content.len());
    for block in result.content {
        if let ContentBlock::Text(text) = &block {
            texts.push(text.text.clone());
        }
        content.push(proto::Content {
            kind: Some(content_kind(block).map_err(bad)?),
        });
    }
    Ok(proto::CallToolResponse {
        content,
        is_error: result.is_error.unwrap_or(false),
        text: texts.join("\n"),
        structured_content_json: result
            .structured_content
            .map(|v| v.to_string())
            .unwrap_or_default(),
        server: server.to_string(),
    })
}

/// One MCP content block as the proto's.
pub fn content_kind(block: ContentBlock) -> Result<Kind, String> {
    Ok(match block {
        ContentBlock::Text(text) => Kind::Text(proto::TextContent { text: text.text }),
        ContentBlock::Image(image) => Kind::Image(proto::ImageContent {
            data: decode(&image.data, "image")?,
            mime_type: image.mime_type,
        }),
        ContentBlock::Audio(audio) => Kind::Audio(proto::AudioContent {
            data: decode(&audio.data, "audio")?,
            mime_type: audio.mime_type,
        }),
        ContentBlock::Resource(embedded) => Kind::Resource(resource(embedded.resource)?),
        ContentBlock::ResourceLink(link) => Kind::ResourceLink(proto::ResourceLink {
            uri: link.uri,
            name: link.name,
            description: link.description.unwrap_or_default(),
            mime_type: link.mime_type.unwrap_or_default(),
            title: link.title.unwrap_or_default(),
            size: link.size,
        }),
        other => return Err(format!("unsupported content block {other:?}")),
    })
}

fn resource(contents: ResourceContents) -> Result<proto::EmbeddedResource, String> {
    let (uri, mime_type, contents) = resource_contents(contents, Contents::Text, Contents::Blob)?;
    Ok(proto::EmbeddedResource {
        uri,
        mime_type,
        contents: Some(contents),
    })
}

/// The URI, MIME type and payload of resource contents, the payload made by `text` or, from
/// the blob decoded once, by `blob` (the base64 text is freed here, before any encoding).
pub fn resource_contents<C>(
    contents: ResourceContents,
    text: impl FnOnce(String) -> C,
    blob: impl FnOnce(Vec<u8>) -> C,
) -> Result<(String, String, C), String> {
    match contents {
        ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text: body,
            ..
        } => Ok((uri, mime_type.unwrap_or_default(), text(body))),
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob: base64,
            ..
        } => {
            let bytes = decode(&base64, &uri)?;
            drop(base64);
            Ok((uri, mime_type.unwrap_or_default(), blob(bytes)))
        }
        other => Err(format!("unsupported resource contents {other:?}")),
    }
}

/// Base64 text as bytes; `what` names it in the error.
pub fn decode(base64: &str, what: &str) -> Result<Vec<u8>, String> {
    STANDARD
        .decode(base64.trim())
        .map_err(|e| format!("the {what} data is not valid base64: {e}"))
}

#[cfg(test)]
mod tests;
