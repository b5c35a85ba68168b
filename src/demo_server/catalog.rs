//! The demo server's tool set: which tools exist, what kind each is, run-time additions and
//! removals, and `tools/list` pagination. Pure: no I/O; the server wraps it in a lock.

use std::{collections::HashMap, sync::Arc};

use rmcp::model::Tool;

use super::tools::{self, Builtin};

/// What answers a call to a tool, found by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ToolKind {
    /// One of the fixed protocol-exercising tools.
    Builtin(Builtin),
    /// A `synthetic_NNNN` tool that echoes its arguments (load and pagination tests).
    Synthetic,
    /// A tool added by `add_tool`, removable by `remove_tool`.
    Runtime,
}

/// Why a run-time change was refused; the text becomes the tool error the caller reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ChangeError {
    EmptyName,
    AlreadyExists(String),
    NotRuntime(String),
    Unknown(String),
}

impl std::fmt::Display for ChangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::EmptyName => write!(f, "tool name must not be empty"),
            Self::AlreadyExists(name) => write!(f, "a tool named {name:?} already exists"),
            Self::NotRuntime(name) => {
                write!(
                    f,
                    "tool {name:?} is built in; only tools added with add_tool can be removed"
                )
            }
            Self::Unknown(name) => write!(f, "no tool named {name:?} was added with add_tool"),
        }
    }
}

/// A `tools/list` cursor that this server did not hand out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BadCursor(pub(super) String);

/// One `tools/list` page and the cursor of the next one, if any.
#[derive(Debug, Clone)]
pub(super) struct Page {
    pub(super) tools: Vec<Tool>,
    pub(super) next_cursor: Option<String>,
}

/// The current tool set, in listing order: built-ins, synthetic tools, then run-time tools in the
/// order they were added.
#[derive(Debug, Clone)]
pub(super) struct Catalog {
    /// Shared with readers so that listing never copies the whole set under the lock.
    tools: Arc<Vec<Tool>>,
    kinds: HashMap<String, ToolKind>,
}

impl Catalog {
    /// The built-in tools followed by `extra_tools` synthetic ones.
    pub(super) fn new(extra_tools: usize) -> Self {
        let builtins = Builtin::ALL
            .iter()
            .map(|b| (b.definition(), ToolKind::Builtin(*b)));
        let synthetic =
            (1..=extra_tools).map(|n| (tools::synthetic_definition(n), ToolKind::Synthetic));
        let (tools, kinds): (Vec<Tool>, HashMap<String, ToolKind>) = builtins
            .chain(synthetic)
            .map(|(tool, kind)| {
                let name = tool.name.to_string();
                (tool, (name, kind))
            })
            .unzip();
        Self {
            tools: Arc::new(tools),
            kinds,
        }
    }

    /// The whole tool set, as of now.
    pub(super) fn snapshot(&self) -> Arc<Vec<Tool>> {
        Arc::clone(&self.tools)
    }

    /// The kind of the tool with this exact name.
    pub(super) fn kind(&self, name: &str) -> Option<ToolKind> {
        self.kinds.get(name).copied()
    }

    /// Adds a run-time tool; any non-empty name not yet taken is accepted, however odd.
    pub(super) fn add_runtime(&mut self, tool: Tool) -> Result<(), ChangeError> {
        let name = tool.name.to_string();
        if name.is_empty() {
            return Err(ChangeError::EmptyName);
        }
        if self.kinds.contains_key(&name) {
            return Err(ChangeError::AlreadyExists(name));
        }
        Arc::make_mut(&mut self.tools).push(tool);
        self.kinds.insert(name, ToolKind::Runtime);
        Ok(())
    }

    /// Removes a run-time tool; built-in and synthetic tools stay.
    pub(super) fn remove_runtime(&mut self, name: &str) -> Result<(), ChangeError> {
        match self.kind(name) {
            Some(ToolKind::Runtime) => {}
            Some(_) => return Err(ChangeError::NotRuntime(name.to_owned())),
            None => return Err(ChangeError::Unknown(name.to_owned())),
        }
        Arc::make_mut(&mut self.tools).retain(|tool| tool.name != name);
        self.kinds.remove(name);
        Ok(())
    }
}

/// Cuts one page out of `tools`. The cursor is the decimal offset of the page's first tool: opaque
/// to clients, as MCP requires, and stateless for us. `page_size` 0 means everything in one page.
/// A cursor past the end (the list shrank between pages) gives an empty last page.
pub(super) fn page(
    tools: &[Tool],
    cursor: Option<&str>,
    page_size: usize,
) -> Result<Page, BadCursor> {
    let start = match cursor {
        None => 0,
        Some(text) => text
            .parse::<usize>()
            .map_err(|_| BadCursor(text.to_owned()))?
            .min(tools.len()),
    };
    let end = if page_size == 0 {
        tools.len()
    } else {
        start.saturating_add(page_size).min(tools.len())
    };
    Ok(Page {
        tools: tools[start..end].to_vec(),
        next_cursor: (end < tools.len()).then(|| end.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(tools: &[Tool]) -> Vec<String> {
        tools.iter().map(|t| t.name.to_string()).collect()
    }

    fn numbered(count: usize) -> Vec<Tool> {
        (0..count).map(tools::synthetic_definition).collect()
    }

    #[test]
    fn pages_cover_every_tool_once_in_order() {
        for (count, page_size) in [(0, 3), (1, 3), (3, 3), (7, 3), (7, 1), (7, 0), (7, 100)] {
            let tools = numbered(count);
            let mut seen = Vec::new();
            let mut cursor: Option<String> = None;
            let mut pages = 0;
            loop {
                let page = page(&tools, cursor.as_deref(), page_size).unwrap();
                assert!(page_size == 0 || page.tools.len() <= page_size);
                seen.extend(names(&page.tools));
                pages += 1;
                match page.next_cursor {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            assert_eq!(seen, names(&tools), "count {count} page size {page_size}");
            let expected_pages = if page_size == 0 || count == 0 {
                1
            } else {
                count.div_ceil(page_size)
            };
            assert_eq!(pages, expected_pages, "count {count} page size {page_size}");
        }
    }

    #[test]
    fn cursor_past_the_end_gives_an_empty_last_page() {
        let page = page(&numbered(3), Some("10"), 2).unwrap();
        assert!(page.tools.is_empty());
        assert_eq!(page.next_cursor, None);
    }

    #[test]
    fn foreign_cursor_is_rejected() {
        for cursor in ["", "abc", "-1", "1.5"] {
            assert_eq!(
                page(&numbered(3), Some(cursor), 2).unwrap_err(),
                BadCursor(cursor.to_owned())
            );
        }
    }

    #[test]
    fn catalog_lists_builtins_then_synthetic_tools() {
        let catalog = Catalog::new(2);
        let listed = names(&catalog.snapshot());
        assert_eq!(listed.len(), Builtin::ALL.len() + 2);
        assert_eq!(listed[0], "echo");
        assert_eq!(
            listed[listed.len() - 2..],
            ["synthetic_0001", "synthetic_0002"]
        );
        assert_eq!(catalog.kind("synthetic_0002"), Some(ToolKind::Synthetic));
        assert_eq!(catalog.kind("synthetic_0003"), None);
    }

    #[test]
    fn runtime_tools_can_be_added_and_removed() {
        let mut catalog = Catalog::new(0);
        let before = catalog.snapshot();
        let odd = "ns.tool/with:odd";
        catalog
            .add_runtime(tools::runtime_definition(odd, None))
            .unwrap();
        assert_eq!(catalog.kind(odd), Some(ToolKind::Runtime));
        assert_eq!(catalog.snapshot().len(), before.len() + 1);
        // An earlier snapshot is not changed under its reader.
        assert_eq!(before.len(), Builtin::ALL.len());
        catalog.remove_runtime(odd).unwrap();
        assert_eq!(catalog.kind(odd), None);
        assert_eq!(names(&catalog.snapshot()), names(&before));
    }

    #[test]
    fn refused_changes_say_why() {
        let mut catalog = Catalog::new(1);
        let add = |catalog: &mut Catalog, name: &str| {
            catalog.add_runtime(tools::runtime_definition(name, None))
        };
        assert_eq!(add(&mut catalog, ""), Err(ChangeError::EmptyName));
        assert!(matches!(
            add(&mut catalog, "echo"),
            Err(ChangeError::AlreadyExists(_))
        ));
        assert!(matches!(
            add(&mut catalog, "synthetic_0001"),
            Err(ChangeError::AlreadyExists(_))
        ));
        add(&mut catalog, "x").unwrap();
        assert!(matches!(
            add(&mut catalog, "x"),
            Err(ChangeError::AlreadyExists(_))
        ));
        assert!(matches!(
            catalog.remove_runtime("echo"),
            Err(ChangeError::NotRuntime(_))
        ));
        assert!(matches!(
            catalog.remove_runtime("nope"),
            Err(ChangeError::Unknown(_))
        ));
    }
}
