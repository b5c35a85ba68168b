//! The proto form of every tool, encoded once per catalog revision and shared by ListTools
//! and Watch, so that no request converts or encodes a tool again; and the search index of
//! that revision, built on the first SearchTools. A tool that a new revision did not change
//! is copied from the encoding of the revision before, not converted anew (converting parses
//! the tool's schema: 17 µs a tool, most of a revision's cost).

use std::sync::Arc;

use tokio::sync::OnceCell;

use super::messages;
use crate::{
    core::broker::Snapshot,
    core::latest_revision::LatestRevision,
    domain::{search::SearchIndex, tool::ExposedTool},
    proto::{EncodedTools, ToolField},
};

/// Every tool of one catalog revision, in proto form.
#[derive(Clone)]
pub struct CachedTools {
    /// The revision they belong to.
    pub revision: u64,
    /// The catalog's tools, sorted by name: the positions of `encoded` and of the index.
    pub exposed: Arc<[Arc<ExposedTool>]>,
    /// The same tools in proto form, encoded (only so: decoded trees would take several
    /// times the room, and ListTools sends the encoding as it is).
    pub encoded: Arc<EncodedTools>,
    /// The search index of the same tools (same positions), once a search asked for it.
    index: Arc<OnceCell<Arc<SearchIndex>>>,
}

impl CachedTools {
    /// The tools of one revision (sorted by name), those unchanged since `earlier` copied
    /// from its encoding.
    fn new(exposed: Arc<[Arc<ExposedTool>]>, revision: u64, earlier: Option<&Self>) -> Self {
        let kept = |tool| earlier.and_then(|earlier| earlier.field_of(tool));
        let fields = exposed.iter().map(|tool| match kept(tool) {
            Some(field) => ToolField::Encoded(field),
            None => ToolField::Encode(messages::tool(tool)),
        });
        let encoded = EncodedTools::new(fields, revision);
        // The encoding holds every schema's text: the specs hold it there too, and the
        // buffers they held it in until now (discovery's, or the revision before's) go.
        let moved = (exposed.iter().enumerate())
            .filter(|(i, tool)| {
                tool.spec
                    .move_input_schema_to(&encoded.input_schema_json(*i))
            })
            .count();
        // A tool of the revision before that this one lacks (its server is down, a rule hides
        // it) may live on in the catalog: it must not keep the earlier encoding alive. Those
        // that nothing but the earlier revision holds go with it.
        let copied = earlier.map_or(0, |earlier| {
            let old = earlier.encoded.bytes();
            (earlier.exposed.iter())
                .filter(|tool| Arc::strong_count(tool) > 1 || Arc::strong_count(&tool.spec) > 1)
                .filter(|tool| tool.spec.move_input_schema_out_of(old))
                .count()
        });
        tracing::debug!(
            revision,
            moved,
            copied,
            "schema texts moved into the new encoding"
        );
        Self {
            revision,
            exposed,
            encoded: Arc::new(encoded),
            index: Arc::default(),
        }
    }

    /// The encoded field of `tool`, if these tools hold it as it is.
    fn field_of(&self, tool: &Arc<ExposedTool>) -> Option<&[u8]> {
        let i = (self.exposed)
            .binary_search_by(|kept| kept.name.cmp(&tool.name))
            .ok()?;
        let kept = &self.exposed[i];
        (Arc::ptr_eq(kept, tool) || kept == tool).then(|| self.encoded.field(i))
    }

    /// The search index of these tools (`snapshot` is theirs), built by the first search of
    /// this revision on a blocking thread (tens of milliseconds for 10,000 tools); searches
    /// that come meanwhile wait for it.
    pub async fn index(&self, snapshot: Arc<Snapshot>) -> Arc<SearchIndex> {
        debug_assert_eq!(snapshot.catalog.revision(), self.revision);
        let encoded = self.encoded.clone();
        let build = || async move {
            let started = std::time::Instant::now();
            let built = tokio::task::spawn_blocking(move || {
                let tools = snapshot.catalog.tools().values();
                SearchIndex::build(
                    (tools.enumerate()).map(|(i, tool)| (&**tool, encoded.param_texts(i))),
                )
            })
            .await
            .expect("building the search index does not panic");
            tracing::debug!(tools = built.len(), took = ?started.elapsed(), "search index built");
            Arc::new(built)
        };
        self.index.get_or_init(build).await.clone()
    }
}

/// The tools of the latest revision asked for.
#[derive(Default)]
pub struct ToolCache(LatestRevision<CachedTools>);

impl ToolCache {
    /// The revision whose tools are held, if any.
    pub fn revision(&self) -> Option<u64> {
        self.0.revision()
    }

    /// The tools of `snapshot`'s revision, converted and encoded at most once.
    pub fn tools(&self, snapshot: &Snapshot) -> CachedTools {
        let revision = snapshot.catalog.revision();
        self.0.get(revision, |earlier| {
            let exposed = snapshot.catalog.tools().values().cloned().collect();
            CachedTools::new(exposed, revision, earlier)
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;
    use crate::domain::{
        names::{ExposedName, ServerName, ToolName},
        tool::{Annotations, ToolSpec},
    };

    fn tool(name: &str, description: &str) -> Arc<ExposedTool> {
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
        Arc::new(ExposedTool {
            name: ExposedName::derive("", name).0,
            server: ServerName::parse("s").unwrap(),
            spec: Arc::new(ToolSpec::new(
                ToolName::new(name),
                description.into(),
                schema.as_object().cloned().unwrap(),
                None,
                Annotations::default(),
            )),
            fixed: Arc::new(Map::new()),
        })
    }

    fn descriptions(cached: &CachedTools) -> Vec<String> {
        (0..cached.exposed.len())
            .map(|i| cached.encoded.tool(i).description)
            .collect()
    }

    #[test]
    fn a_new_revision_encodes_what_changed_and_copies_the_rest() {
        let (a, b, c) = (tool("a", "one"), tool("b", "two"), tool("c", "three"));
        let first = CachedTools::new(vec![a.clone(), b, c.clone()].into(), 1, None);
        // b is changed, d is new, and a is equal but not the same `Arc`.
        let (b, d) = (tool("b", "two, new words"), tool("d", "four"));
        let tools: Arc<[_]> = vec![tool("a", "one"), b, c, d].into();
        assert!(first.field_of(&tools[0]).is_some() && first.field_of(&tools[2]).is_some());
        assert!(first.field_of(&tools[1]).is_none() && first.field_of(&tools[3]).is_none());
        let second = CachedTools::new(tools.clone(), 2, Some(&first));
        let fresh = CachedTools::new(tools, 2, None);
        assert_eq!(
            descriptions(&second),
            ["one", "two, new words", "three", "four"]
        );
        assert_eq!(second.encoded.field(1), fresh.encoded.field(1));
        assert_eq!(
            second.encoded.response(|_| true).encoded_chunks(),
            fresh.encoded.response(|_| true).encoded_chunks()
        );
        assert_eq!(second.encoded.tool(0), messages::tool(&a));
    }

    #[test]
    fn the_specs_hold_their_schema_texts_in_the_latest_encoding() {
        let tools: Arc<[_]> = vec![tool("a", "one"), tool("b", "two")].into();
        let text_in = |cached: &CachedTools, i: usize| {
            let text = tools[i].spec.input_schema_json();
            (cached.encoded.field(i).as_ptr_range()).contains(&text.as_ptr())
        };
        let before = tools[0].spec.input_schema_json();
        let first = CachedTools::new(tools.clone(), 1, None);
        assert!(text_in(&first, 0) && text_in(&first, 1));
        assert_eq!(tools[0].spec.input_schema_json(), before);
        let second = CachedTools::new(tools.clone(), 2, Some(&first));
        assert!(text_in(&second, 0) && text_in(&second, 1), "moved on");
        assert_eq!(messages::tool(&tools[1]), second.encoded.tool(1));
    }

    #[test]
    fn a_tool_a_new_revision_lacks_keeps_the_earlier_encoding_only_if_nothing_else_holds_it() {
        let (a, held, gone) = (tool("a", "one"), tool("b", "two"), tool("c", "three"));
        let first = CachedTools::new(vec![a.clone(), held.clone(), gone].into(), 1, None);
        let in_first = |i: usize| {
            let text = first.exposed[i].spec.input_schema_json();
            first
                .encoded
                .bytes()
                .as_ptr_range()
                .contains(&text.as_ptr())
        };
        assert!(in_first(0) && in_first(1) && in_first(2));
        // b lives on (as a catalog keeps the tools of a server that went down); c does not.
        let second = CachedTools::new(vec![a].into(), 2, Some(&first));
        assert!(!in_first(0), "a moved to the second encoding");
        assert!(!in_first(1), "b holds its text in a buffer of its own");
        assert!(in_first(2), "c goes with the first encoding: no copy");
        assert_eq!(
            held.spec.input_schema_json(),
            second.exposed[0].spec.input_schema_json()
        );
    }
}
