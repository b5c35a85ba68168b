//! Conversions of resources and prompts between the broker's (and MCP's) types and the proto
//! messages. Pure.

use rmcp::model::{GetPromptResult, ReadResourceResult, Role};

use crate::faces::grpc::messages::{content_kind, icons, resource_contents};
use crate::{
    domain::{
        names::ServerName,
        offer::{ExposedPrompt, ResourceSpec, TemplateSpec},
        request_error::RequestError,
    },
    proto::{self, resource_contents::Contents},
};

/// A listed resource as the proto describes it.
pub fn resource(server: &ServerName, spec: &ResourceSpec) -> proto::Resource {
    proto::Resource {
        server: server.to_string(),
        uri: spec.uri.clone(),
        name: spec.name.clone(),
        title: spec.title.clone().unwrap_or_default(),
        description: spec.description.clone().unwrap_or_default(),
        mime_type: spec.mime_type.clone().unwrap_or_default(),
        size: spec.size,
        icons: icons(&spec.icons),
    }
}

/// A listed resource template as the proto describes it.
pub fn template(server: &ServerName, spec: &TemplateSpec) -> proto::ResourceTemplate {
    proto::ResourceTemplate {
        server: server.to_string(),
        uri_template: spec.uri_template.clone(),
        name: spec.name.clone(),
        description: spec.description.clone().unwrap_or_default(),
        mime_type: spec.mime_type.clone().unwrap_or_default(),
        title: spec.title.clone().unwrap_or_default(),
        icons: icons(&spec.icons),
    }
}

/// A prompt as the proto describes it.
pub fn prompt(prompt: &ExposedPrompt) -> proto::Prompt {
    let spec = &prompt.spec;
    proto::Prompt {
        name: prompt.name.clone(),
        original_name: spec.original.clone(),
        server: prompt.server.to_string(),
        description: spec.description.clone().unwrap_or_default(),
        arguments: spec
            .arguments
            .iter()
            .map(|argument| proto::PromptArgument {
                name: argument.name.clone(),
                description: argument.description.clone().unwrap_or_default(),
                required: argument.required,
            })
            .collect(),
        title: spec.title.clone().unwrap_or_default(),
        icons: icons(&spec.icons),
    }
}

/// What `server` answered to `resources/read`: text as text, blobs decoded to bytes once
/// (moved, not copied, into the message).
pub fn read_response(
    server: &ServerName,
    result: ReadResourceResult,
) -> Result<proto::ReadResourceResponse, RequestError> {
    let bad = |reason: String| RequestError::BadResult {
        server: server.clone(),
        reason,
    };
    let contents = result
        .contents
        .into_iter()
        .map(|contents| {
            let (uri, mime_type, contents) =
                resource_contents(contents, Contents::Text, Contents::Blob).map_err(bad)?;
            Ok(proto::ResourceContents {
                uri,
                mime_type,
                contents: Some(contents),
            })
        })
        .collect::<Result<_, RequestError>>()?;
    Ok(proto::ReadResourceResponse { contents })
}

/// What `server` answered to `prompts/get`.
pub fn prompt_response(
    server: &ServerName,
    result: GetPromptResult,
) -> Result<proto::GetPromptResponse, RequestError> {
    let messages = result
        .messages
        .into_iter()
        .map(|message| {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            let kind = content_kind(message.content).map_err(|reason| RequestError::BadResult {
                server: server.clone(),
                reason,
            })?;
            Ok(proto::PromptMessage {
                role: role.into(),
                content: Some(proto::Content { kind: Some(kind) }),
            })
        })
        .collect::<Result<_, RequestError>>()?;
    Ok(proto::GetPromptResponse {
        description: result.description.unwrap_or_default(),
        messages,
    })
}
