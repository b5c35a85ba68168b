//! A server's icons (for itself, a tool, a resource, a prompt) as the broker holds them.

use rmcp::model::Icon;

use crate::domain::icon::{self, Icons};

/// `given` in the broker's terms; none given is none held.
pub(in crate::upstream) fn icons(given: Option<Vec<Icon>>) -> Icons {
    given.unwrap_or_default().into_iter().map(icon).collect()
}

fn icon(icon: Icon) -> icon::Icon {
    icon::Icon {
        src: icon.src,
        mime_type: icon.mime_type,
        sizes: icon.sizes.unwrap_or_default(),
        // Its name as MCP writes it (`light`, `dark`, or one added later).
        theme: icon
            .theme
            .and_then(|theme| serde_json::to_value(theme).ok())
            .and_then(|theme| theme.as_str().map(str::to_owned)),
    }
}
