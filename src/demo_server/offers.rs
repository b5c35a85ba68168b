//! The demo's resources and prompts: a text document, a small binary (the `tiny_image` PNG),
//! a template that echoes its parameter, and a prompt with a required and an optional
//! argument. Pure.

use base64::{Engine, engine::general_purpose::STANDARD as BASE64};
use rmcp::{
    ErrorData,
    model::{
        GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, ReadResourceResult,
        Resource, ResourceContents, ResourceTemplate, Role,
    },
};

use super::content::{logo_icon, tiny_png};

/// The text document.
pub(super) const README_URI: &str = "demo://readme";
/// The binary resource.
pub(super) const LOGO_URI: &str = "demo://logo.png";
/// What the template's URIs start with.
const ECHO_PREFIX: &str = "demo://echo/";
const README: &str = "The toolbroker demo server: tools that exercise MCP, two resources, a \
                      resource template and a prompt.";

/// The listed resources.
pub(super) fn resources() -> Vec<Resource> {
    vec![
        Resource::new(README_URI, "readme")
            .with_title("About the demo server")
            .with_mime_type("text/plain")
            .with_size(README.len() as u64),
        Resource::new(LOGO_URI, "logo")
            .with_title("An 8x8 PNG")
            .with_icons(vec![logo_icon()])
            .with_mime_type("image/png")
            .with_size(tiny_png().len() as u64),
    ]
}

/// The listed templates.
pub(super) fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(format!("{ECHO_PREFIX}{{text}}"), "echo")
            .with_description("A text resource whose content is the {text} of its URI.")
            .with_mime_type("text/plain"),
    ]
}

/// How long a read of the demo's resources may be reused (they never change), in milliseconds.
pub(super) const READ_TTL_MS: u64 = 3_600_000;

/// Reads a resource; -32002 (resource not found) for a URI the server does not have.
pub(super) fn read(uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let contents = match uri {
        README_URI => ResourceContents::text(README, uri),
        LOGO_URI => {
            ResourceContents::blob(BASE64.encode(tiny_png()), uri).with_mime_type("image/png")
        }
        _ => match uri.strip_prefix(ECHO_PREFIX) {
            Some(text) => ResourceContents::text(text, uri),
            None => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource {uri}"),
                    None,
                ));
            }
        },
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// The listed prompts.
pub(super) fn prompts() -> Vec<Prompt> {
    vec![Prompt::new(
        "summarize",
        Some("Asks the model to summarize a topic, optionally in a given style."),
        Some(vec![
            PromptArgument::new("topic")
                .with_description("What to summarize.")
                .with_required(true),
            PromptArgument::new("style")
                .with_description("How, e.g. \"in one sentence\".")
                .with_required(false),
        ]),
    )]
}

/// Fills in a prompt; -32602 for an unknown prompt or a missing argument.
pub(super) fn get_prompt(name: &str, arguments: JsonObject) -> Result<GetPromptResult, ErrorData> {
    if name != "summarize" {
        return Err(ErrorData::invalid_params(
            format!("unknown prompt {name:?}"),
            None,
        ));
    }
    let text = |key: &str| {
        arguments
            .get(key)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let Some(topic) = text("topic") else {
        return Err(ErrorData::invalid_params(
            "missing argument \"topic\"",
            None,
        ));
    };
    let style = text("style")
        .map(|style| format!(" {style}"))
        .unwrap_or_default();
    let message = PromptMessage::new_text(Role::User, format!("Summarize {topic}{style}."));
    let mut result = GetPromptResult::new(vec![message]);
    result.description = Some(format!("A summary of {topic}"));
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_resource_and_the_template_can_be_read() {
        for resource in resources() {
            assert!(read(&resource.uri).is_ok(), "{}", resource.uri);
        }
        let echoed = read("demo://echo/hello").unwrap();
        assert!(matches!(&echoed.contents[0],
            ResourceContents::TextResourceContents { text, .. } if text == "hello"));
        assert_eq!(read("demo://nope").unwrap_err().code.0, -32002);
    }

    #[test]
    fn the_prompt_needs_its_topic() {
        let mut arguments = JsonObject::new();
        assert!(get_prompt("summarize", arguments.clone()).is_err());
        arguments.insert("topic".into(), "MCP".into());
        arguments.insert("style".into(), "in one sentence".into());
        let result = get_prompt("summarize", arguments).unwrap();
        assert_eq!(result.messages.len(), 1);
        assert!(get_prompt("other", JsonObject::new()).is_err());
    }
}
