//! Resources and resource templates as MCP's lists declare them, and which server a URI is
//! read from (MCP's `resources/read` names no server; the broker needs one). Pure.

use rmcp::model::{Resource, ResourceTemplate};

use super::{given, icon};
use crate::domain::{
    offer::{ResourceSpec, TemplateSpec},
    uri_template,
};

/// A listed resource as MCP's: empty texts absent.
pub fn resource(spec: &ResourceSpec) -> Resource {
    let mut resource = Resource::new(spec.uri.clone(), spec.name.clone());
    resource.title = given(spec.title.as_deref());
    resource.description = given(spec.description.as_deref());
    resource.mime_type = given(spec.mime_type.as_deref());
    resource.size = spec.size;
    resource.icons = icon::icons(&spec.icons);
    resource
}

/// A listed resource template as MCP's: empty texts absent.
pub fn template(spec: &TemplateSpec) -> ResourceTemplate {
    let mut template = ResourceTemplate::new(spec.uri_template.clone(), spec.name.clone());
    template.title = given(spec.title.as_deref());
    template.description = given(spec.description.as_deref());
    template.mime_type = given(spec.mime_type.as_deref());
    template.icons = icon::icons(&spec.icons);
    template
}

/// The server that reads `uri`, given the `(server, uri)` of the resources the caller may
/// read and the `(server, uri template)` of their templates: the one listing it; else one
/// with a template it begins with the literal start of (up to the first expression), those
/// it wholly matches first, then the longest such start, then the first listed. A URI no
/// template fits at all has no server.
pub fn owner<'a>(
    resources: impl IntoIterator<Item = (&'a str, &'a str)>,
    templates: impl IntoIterator<Item = (&'a str, &'a str)>,
    uri: &str,
) -> Option<&'a str> {
    if let Some((server, _)) = resources.into_iter().find(|(_, listed)| *listed == uri) {
        return Some(server);
    }
    let mut best: Option<((bool, usize), &'a str)> = None;
    for (server, template) in templates {
        let start = template.split('{').next().unwrap_or_default();
        if !uri.starts_with(start) {
            continue;
        }
        let rank = (uri_template::matches(template, uri), start.len());
        if best.is_none_or(|(best, _)| rank > best) {
            best = Some((rank, server));
        }
    }
    best.map(|(_, server)| server)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const RESOURCES: [(&str, &str); 2] = [("a", "demo://readme"), ("b", "demo://echo/fixed")];
    const TEMPLATES: [(&str, &str); 5] = [
        ("a", "demo://{path}"),
        ("c", "demo://echo/{text}"),
        ("e", "demo://echo/{text}/{page}"),
        ("f", "demo://echo/{text}/{page}"),
        ("d", "file:///{+path}"),
    ];

    #[test]
    fn a_uri_is_read_from_the_server_that_lists_it_or_whose_template_fits_best() {
        let owner = |uri| owner(RESOURCES, TEMPLATES, uri);
        let cases = [
            ("demo://readme", Some("a"), "listed"),
            ("demo://echo/fixed", Some("b"), "listed beats templates"),
            ("demo://echo/hello", Some("c"), "the longest literal start"),
            (
                "demo://echo/hello/2",
                Some("e"),
                "a whole match, the first listed",
            ),
            ("demo://other", Some("a"), "a whole match"),
            ("demo://a/b", Some("a"), "else the literal start"),
            (
                "file:///etc/hosts",
                Some("d"),
                "a reserved expansion spans slashes",
            ),
            ("http://x", None, "no template fits"),
        ];
        for (uri, server, why) in cases {
            assert_eq!(owner(uri), server, "{uri}: {why}");
        }
    }

    #[test]
    fn resources_and_templates_show_what_they_have() {
        let spec = ResourceSpec {
            uri: "demo://readme".into(),
            name: "readme".into(),
            title: Some("Read me".into()),
            description: Some(String::new()),
            mime_type: Some("text/plain".into()),
            size: Some(12),
            icons: [crate::domain::icon::Icon {
                src: "https://example.com/r.png".into(),
                theme: Some("light".into()),
                ..Default::default()
            }]
            .into(),
        };
        assert_eq!(
            serde_json::to_value(resource(&spec)).unwrap(),
            json!({"uri": "demo://readme", "name": "readme", "title": "Read me",
                   "mimeType": "text/plain", "size": 12,
                   "icons": [{"src": "https://example.com/r.png", "theme": "light"}]})
        );
        let spec = TemplateSpec {
            uri_template: "demo://echo/{text}".into(),
            name: "echo".into(),
            description: Some("Echoes.".into()),
            ..TemplateSpec::default()
        };
        assert_eq!(
            serde_json::to_value(template(&spec)).unwrap(),
            json!({"uriTemplate": "demo://echo/{text}", "name": "echo",
                   "description": "Echoes."})
        );
    }
}
