//! Conversions between the broker's types and the proto messages. Pure.

use std::time::{Duration, SystemTime};

use base64::{Engine, engine::general_purpose::STANDARD};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{Map, Number, Value};

use crate::{
    domain::{
        catalog::{Change, Event, ServerView, ToolsChange},
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
    }
}

fn param(param: Param) -> proto::Param {
    proto::Param {
        name: param.name,
        r#type: param.r#type,
        description: param.description,
        required: param.required,
        enum_values: param.enum_values,
        items: param.items.map(|p| Box::new(self::param(*p))),
        properties: param.properties.into_iter().map(self::param).collect(),
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

/// A server's status as the proto describes it.
/// A server's status; `sessions` is its per-caller sessions alive.
pub fn server_status(view: &ServerView, sessions: usize) -> proto::ServerStatus {
    let condition = &view.condition;
    proto::ServerStatus {
        name: view.name.to_string(),
        state: server_state(condition.state).into(),
        message: view.message.clone(),
        transport: condition.transport.as_str().into(),
        tool_count: view.tool_count,
        restarts: condition.restarts,
        since: Some(timestamp(condition.since)),
        sessions: u32::try_from(sessions).unwrap_or(u32::MAX),
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

/// A catalog event as a Watch event (none for a `Views` event, which streams act on).
pub fn watch_event(event: &Event) -> proto::WatchEvent {
    let event_kind = match &event.change {
        Change::Views => None,
        Change::Tools(server, change) => Some(proto::watch_event::Event::ToolsChanged(
            tools_changed(server, change),
        )),
        Change::Server(view) => Some(proto::watch_event::Event::ServerStatus(server_status(
            view, 0,
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

/// A `google.protobuf.Struct` as a JSON object. Numbers come out as floats; the call rules
/// decide which of them are integers. A number JSON cannot hold (NaN, ±infinity) is the
/// caller's mistake, named by its path: `arguments.point.xs[2]`.
pub fn struct_to_json(fields: prost_types::Struct) -> Result<Map<String, Value>, RequestError> {
    object_to_json(fields).map_err(|e| {
        let path: String = e.at.iter().rev().map(String::as_str).collect();
        RequestError::InvalidArguments(format!("arguments{path}: {}", e.why))
    })
}

/// Why a value has no JSON form: where (path segments, innermost first) and what.
struct NotJson {
    at: Vec<String>,
    why: String,
}

impl NotJson {
    /// The same fault, seen from one level up.
    fn under(mut self, segment: String) -> Self {
        self.at.push(segment);
        self
    }
}

fn object_to_json(fields: prost_types::Struct) -> Result<Map<String, Value>, NotJson> {
    fields
        .fields
        .into_iter()
        .map(|(name, value)| match value_to_json(value) {
            Ok(json) => Ok((name, json)),
            Err(e) => Err(e.under(format!(".{name}"))),
        })
        .collect()
}

fn value_to_json(value: prost_types::Value) -> Result<Value, NotJson> {
    use prost_types::value::Kind as V;
    Ok(match value.kind {
        None | Some(V::NullValue(_)) => Value::Null,
        Some(V::BoolValue(b)) => Value::Bool(b),
        Some(V::StringValue(s)) => Value::String(s),
        Some(V::NumberValue(n)) => Value::Number(Number::from_f64(n).ok_or_else(|| NotJson {
            at: Vec::new(),
            why: format!("{n} is not a JSON number"),
        })?),
        Some(V::ListValue(list)) => Value::Array(
            list.values
                .into_iter()
                .enumerate()
                .map(|(i, v)| value_to_json(v).map_err(|e| e.under(format!("[{i}]"))))
                .collect::<Result<_, _>>()?,
        ),
        Some(V::StructValue(fields)) => Value::Object(object_to_json(fields)?),
    })
}

/// A JSON object as a `google.protobuf.Struct`: what a client does when it sends
/// `CallToolRequest.arguments` built from JSON (protobuf's JSON mapping, as grpcurl applies
/// it). Every number becomes a double, so integers beyond 2^53 lose precision (that is what
/// `arguments_json` is for), and fields are kept in name order, not the object's. Up to
/// those, [`struct_to_json`] is its inverse.
pub fn json_to_struct(object: &Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: object
            .iter()
            .map(|(name, value)| (name.clone(), json_to_value(value)))
            .collect(),
    }
}

fn json_to_value(value: &Value) -> prost_types::Value {
    use prost_types::value::Kind as V;
    let kind = match value {
        Value::Null => V::NullValue(prost_types::NullValue::NullValue.into()),
        Value::Bool(b) => V::BoolValue(*b),
        // Without serde_json's arbitrary precision every number has an f64 form.
        Value::Number(n) => V::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => V::StringValue(s.clone()),
        Value::Array(items) => V::ListValue(prost_types::ListValue {
            values: items.iter().map(json_to_value).collect(),
        }),
        Value::Object(fields) => V::StructValue(json_to_struct(fields)),
    };
    prost_types::Value { kind: Some(kind) }
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
#[path = "convert_tests.rs"]
mod tests;
