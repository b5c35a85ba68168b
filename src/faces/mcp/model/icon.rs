//! Icons as MCP's lists declare them. Pure.

use rmcp::model::{Icon, IconTheme};
use serde_json::Value;

use crate::domain::icon;

/// `icons` as MCP's; absent when there are none.
pub fn icons(icons: &[icon::Icon]) -> Option<Vec<Icon>> {
    (!icons.is_empty()).then(|| icons.iter().map(mcp_icon).collect())
}

fn mcp_icon(given: &icon::Icon) -> Icon {
    let mut icon = Icon::new(given.src.clone());
    icon.mime_type = given.mime_type.clone().filter(|text| !text.is_empty());
    icon.sizes = (!given.sizes.is_empty()).then(|| given.sizes.clone());
    icon.theme = given.theme.as_deref().and_then(theme);
    icon
}

/// A theme MCP knows by this name (one it does not is left out, as "any theme").
fn theme(name: &str) -> Option<IconTheme> {
    serde_json::from_value(Value::String(name.to_owned())).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn icons_show_what_was_given_and_none_is_absent() {
        assert_eq!(icons(&[]), None);
        let given = [
            icon::Icon {
                src: "https://example.com/a.png".into(),
                mime_type: Some("image/png".into()),
                sizes: vec!["48x48".into()],
                theme: Some("dark".into()),
            },
            icon::Icon {
                src: "data:image/svg+xml;base64,PHN2Zy8+".into(),
                theme: Some("sepia".into()),
                ..icon::Icon::default()
            },
        ];
        assert_eq!(
            serde_json::to_value(icons(&given)).unwrap(),
            json!([
                {"src": "https://example.com/a.png", "mimeType": "image/png", "sizes": ["48x48"],
                 "theme": "dark"},
                {"src": "data:image/svg+xml;base64,PHN2Zy8+"},
            ])
        );
    }
}
