//! An icon a server gave for itself, a tool, a resource or a prompt (MCP's `Icon`), carried as
//! it was given. Pure.

use std::sync::Arc;

/// One icon.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Icon {
    /// Where it is: an `https:` or `data:` URI.
    pub src: String,
    /// Its MIME type, if the server named one.
    pub mime_type: Option<String>,
    /// The sizes it suits (`48x48`, `any`); empty when the server named none.
    pub sizes: Vec<String>,
    /// The theme it is for (`light`, `dark`); none for any.
    pub theme: Option<String>,
}

/// The icons of one thing: shared, since every revision of the catalog holds them.
pub type Icons = Arc<[Icon]>;
