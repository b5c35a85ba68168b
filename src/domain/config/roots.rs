//! `roots`: the `file://` URIs the broker answers to a server's `roots/list`. Pure.

use url::Url;

use super::{path, validate::Checker};

impl Checker<'_, '_> {
    /// Each root must be an absolute `file://` URI (MCP roots are file URIs).
    pub(super) fn roots(&mut self, raw: Option<Vec<String>>, at: &str) -> Vec<String> {
        let roots = raw.unwrap_or_default();
        for (index, root) in roots.iter().enumerate() {
            let at = path::index(&path::field(at, "roots"), index);
            match Url::parse(root) {
                Ok(url) if url.scheme() == "file" => {}
                Ok(url) => self.error(
                    &at,
                    format!("a root is a file:// URI, found scheme {:?}", url.scheme()),
                ),
                Err(e) => self.error(
                    &at,
                    format!("not a URI ({e}); write a root like \"file:///srv/data\""),
                ),
            }
        }
        roots
    }
}
