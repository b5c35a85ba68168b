//! What a server offers besides tools, as the broker holds it: resources, resource templates
//! and prompts, and the whole of a server's lists. Pure.

use super::{icon::Icons, tool::ToolSpec};

/// A resource a server lists.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceSpec {
    /// Its URI.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// What it is.
    pub description: Option<String>,
    /// Its MIME type.
    pub mime_type: Option<String>,
    /// Its size in bytes.
    pub size: Option<u64>,
    /// Its icons.
    pub icons: Icons,
}

/// A resource template a server lists.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TemplateSpec {
    /// The RFC 6570 URI template.
    pub uri_template: String,
    /// Its name.
    pub name: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// What it is.
    pub description: Option<String>,
    /// The MIME type of what it yields.
    pub mime_type: Option<String>,
    /// Its icons.
    pub icons: Icons,
}

/// A server's resources and resource templates.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Resources {
    /// Concrete resources, as listed.
    pub resources: Vec<ResourceSpec>,
    /// Templates, as listed.
    pub templates: Vec<TemplateSpec>,
}

impl Resources {
    /// Whether there is nothing.
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.templates.is_empty()
    }
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PromptArgumentSpec {
    /// Its name.
    pub name: String,
    /// What it means.
    pub description: Option<String>,
    /// Whether it must be given.
    pub required: bool,
}

/// A prompt a server lists.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PromptSpec {
    /// Its name on the server.
    pub original: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Its arguments.
    pub arguments: Vec<PromptArgumentSpec>,
    /// Its icons.
    pub icons: Icons,
}

/// Everything a server lists: tools, resources and templates, prompts.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Its tools.
    pub tools: Vec<ToolSpec>,
    /// Its resources and templates (none if it has no `resources` capability).
    pub resources: Resources,
    /// Its prompts (none if it has no `prompts` capability).
    pub prompts: Vec<PromptSpec>,
}

/// A prompt as callers see it: exposed as its server's prefix + its original name.
#[derive(Debug, Clone, PartialEq)]
pub struct ExposedPrompt {
    /// The exposed name.
    pub name: String,
    /// The server offering it.
    pub server: super::names::ServerName,
    /// What the server declared.
    pub spec: std::sync::Arc<PromptSpec>,
}
