//! The face's `tools/list`, two ways.
//!
//! - [`ToolsListAnswer`]: the JSON-RPC answer written straight from the schema texts the catalog
//!   revision holds, for the requests the face answers itself, a piece at a time as the
//!   connection takes it. No schema is parsed, and nothing is kept: listing 10,002 tools
//!   through rmcp's types held ~270 MiB of parsed schemas for as long as the revision lasted.
//! - [`ToolList`]: the tools in rmcp's types, for the requests rmcp answers, converted once
//!   per catalog revision and shared by all sessions, so that a request only copies the
//!   entries its caller may use. Converting per request took ~20 ms of CPU for 1,000 tools.
//!
//! Both list the same [`page`]s with the same JSON (a test holds them to it): a catalog whose
//! answer would pass [`PAGE_BYTES`] is listed in pages, which rmcp's clients need past 16 MiB.
//!
//! **What would let it go**: rmcp listing tools from text it is given (a raw schema kept as it
//! is) rather than parsed `Tool`s, for the first form; an rmcp list shared between sessions, for
//! the second. The property test writes pages of any tools (texts that need escaping, any
//! budget) by hand and through rmcp's types, and holds them equal.

use std::{collections::BTreeMap, ops::Bound, sync::Arc};

use bytes::Bytes;
use rmcp::model::{RequestId, Tool};

use crate::{
    auth::Caller,
    core::broker::Snapshot,
    core::latest_revision::LatestRevision,
    domain::{
        names::{ExposedName, is_name_char},
        tool::ExposedTool,
    },
    faces::mcp::model::tool::{self as mcp_tool, ToolFields},
};

/// The tools of the latest revision asked for.
#[derive(Default)]
pub struct ToolList(LatestRevision<Arc<[Tool]>>);

impl ToolList {
    /// Every tool of `snapshot`'s revision in MCP form (exposed names, sorted), converted at
    /// most once.
    pub fn tools(&self, snapshot: &Snapshot) -> Arc<[Tool]> {
        self.0.get(snapshot.catalog.revision(), |_| {
            snapshot
                .catalog
                .tools()
                .values()
                .map(|tool| mcp_tool::tool(&ToolFields::of(tool, &tool.spec.input_schema_json())))
                .collect()
        })
    }
}

/// About the most one page of `tools/list` holds: half of the 16 MiB that rmcp's clients
/// accept in one message by default. A catalog whose answer fits (~5,000 tools of 1.5 KB)
/// is one page, as before, for the clients that never ask for a second.
pub const PAGE_BYTES: usize = 8 * 1024 * 1024;

/// One page of a listing: its tools, and the cursor of the next page if there is one.
pub struct Page {
    /// The tools, sorted by exposed name.
    pub tools: Vec<Arc<ExposedTool>>,
    /// Where the next page starts: the exposed name of its first tool (opaque to clients).
    pub next: Option<String>,
}

/// A cursor that is not one the face gave: not an exposed name.
#[derive(Debug, thiserror::Error)]
#[error("invalid cursor {0:?}: give the nextCursor of the page before, or none for the first page")]
pub struct InvalidCursor(String);

/// The page of `tools` that `caller` may use starting at `cursor` (the first page if none):
/// tools while their JSON stays within about `budget` bytes (at least one), in name order.
/// A tool removed since the cursor was given is skipped; the page starts at the next name.
pub fn page(
    tools: &BTreeMap<ExposedName, Arc<ExposedTool>>,
    caller: &Caller,
    cursor: Option<&str>,
    budget: usize,
) -> Result<Page, InvalidCursor> {
    let from = match cursor {
        Some(cursor) if cursor.is_empty() || !cursor.chars().all(is_name_char) => {
            return Err(InvalidCursor(cursor.to_owned()));
        }
        Some(cursor) => Bound::Included(cursor),
        None => Bound::Unbounded,
    };
    let listed = tools
        .range::<str, _>((from, Bound::Unbounded))
        .map(|(_, tool)| tool)
        .filter(|tool| caller.may_use(tool.name.as_str()));
    let mut page = Vec::new();
    let mut size = 0;
    for tool in listed {
        let more = size_hint(tool);
        if !page.is_empty() && size + more > budget {
            return Ok(Page {
                tools: page,
                next: Some(tool.name.as_str().to_owned()),
            });
        }
        size += more;
        page.push(tool.clone());
    }
    Ok(Page {
        tools: page,
        next: None,
    })
}

/// How much of an [`ToolsListAnswer`] is written at a time: a page can be 8 MiB, which sixteen
/// clients listing at once would otherwise hold sixteen times over.
const PIECE: usize = 256 * 1024;

/// The JSON-RPC answer to one `tools/list` request: one [`Page`], its tools as
/// [`mcp_tool::tool`] declares them, written in pieces of about 256 KiB as they are asked for.
pub struct ToolsListAnswer {
    /// The tools listed.
    tools: Vec<Arc<ExposedTool>>,
    /// The answer's closing (the end of the tools, the next cursor, the end of the message),
    /// until the last piece takes it.
    closing: Option<Vec<u8>>,
    /// How many are written.
    written: usize,
    /// The answer's opening, until the first piece takes it.
    opening: Vec<u8>,
}

impl ToolsListAnswer {
    /// The answer to `tools/list` request `id`: `page`.
    pub fn new(page: Page, id: &RequestId) -> serde_json::Result<Self> {
        let mut opening = br#"{"jsonrpc":"2.0","id":"#.to_vec();
        serde_json::to_writer(&mut opening, id)?;
        opening.extend_from_slice(br#","result":{"tools":["#);
        let mut closing = b"]".to_vec();
        if let Some(next) = &page.next {
            closing.extend_from_slice(br#","nextCursor":"#);
            serde_json::to_writer(&mut closing, next)?;
        }
        closing.extend_from_slice(b"}}");
        Ok(Self {
            tools: page.tools,
            closing: Some(closing),
            written: 0,
            opening,
        })
    }

    /// Whether every piece has been taken.
    pub fn is_done(&self) -> bool {
        self.closing.is_none()
    }
}

impl Iterator for ToolsListAnswer {
    type Item = serde_json::Result<Bytes>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.is_done() {
            return None;
        }
        let mut piece = std::mem::take(&mut self.opening);
        // Room for a piece and about one tool more: growing a buffer copies it.
        let next = self
            .tools
            .get(self.written)
            .map_or(0, |tool| size_hint(tool));
        piece.reserve(PIECE + next);
        while piece.len() < PIECE
            && let Some(tool) = self.tools.get(self.written)
        {
            if self.written > 0 {
                piece.push(b',');
            }
            if let Err(error) = write_tool(&mut piece, tool) {
                self.closing = None;
                return Some(Err(error));
            }
            self.written += 1;
        }
        if self.written == self.tools.len()
            && let Some(closing) = self.closing.take()
        {
            piece.extend_from_slice(&closing);
        }
        Some(Ok(Bytes::from(piece)))
    }
}

/// About how long `tool`'s JSON is.
fn size_hint(tool: &ExposedTool) -> usize {
    let spec = &tool.spec;
    let output = spec.output_schema_json.as_deref().map_or(0, str::len);
    // A title is shown twice: as MCP's `title` and in the annotations.
    let title = spec.display_title().map_or(0, str::len);
    let icons: usize = (spec.icons.iter()).map(|icon| icon.src.len() + 64).sum();
    tool.name.as_str().len()
        + spec.description.len()
        + spec.input_schema_json().len()
        + output
        + 2 * title
        + icons
        + 192
}

/// One tool's JSON, as [`mcp_tool::write_json`] writes it from the schema texts.
fn write_tool(out: &mut Vec<u8>, tool: &ExposedTool) -> serde_json::Result<()> {
    let input = tool.spec.input_schema_json();
    mcp_tool::write_json(out, &ToolFields::of(tool, &input))
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};

    use super::*;
    use crate::domain::{
        icon::Icon,
        names::{ServerName, ToolName},
        tool::{Annotations, ToolSpec},
    };

    /// Tools `t_00`.. with descriptions of `text` bytes; every third declares an output schema.
    fn catalog(count: usize, text: usize) -> BTreeMap<ExposedName, Arc<ExposedTool>> {
        let schema = |value: Value| match value {
            Value::Object(object) => object,
            _ => Map::new(),
        };
        (0..count)
            .map(|index| {
                let original = format!("{index:02}");
                let output = schema(json!({"type": "object", "properties": {"n": {}}}));
                let annotations = Annotations {
                    title: Some(format!("Tool \"{index}\"")),
                    read_only: Some(index % 2 == 0),
                    ..Annotations::default()
                };
                let spec = ToolSpec::new(
                    ToolName::new(&original),
                    format!("{index} {}", "é".repeat(text / 2)),
                    schema(json!({"type": "object", "properties": {"x": {"type": "string"}}})),
                    (index % 3 == 0).then_some(&output),
                    annotations,
                );
                exposed(&original, spec)
            })
            .collect()
    }

    /// `spec` exposed as `t_<original>` of server `s`.
    fn exposed(original: &str, spec: ToolSpec) -> (ExposedName, Arc<ExposedTool>) {
        let name = ExposedName::derive("t_", original).0;
        let tool = ExposedTool {
            name: name.clone(),
            server: ServerName::parse("s").unwrap(),
            spec: Arc::new(spec),
            fixed: Arc::default(),
        };
        (name, Arc::new(tool))
    }

    /// `tools` as rmcp's JSON of them.
    fn rmcp_json(tools: &[Arc<ExposedTool>]) -> Vec<Value> {
        tools
            .iter()
            .map(|tool| {
                let input = tool.spec.input_schema_json();
                serde_json::to_value(mcp_tool::tool(&ToolFields::of(tool, &input))).unwrap()
            })
            .collect()
    }

    fn names(tools: &[Arc<ExposedTool>]) -> Vec<&str> {
        tools.iter().map(|tool| tool.name.as_str()).collect()
    }

    #[test]
    fn pages_follow_their_cursors_through_every_tool_once() {
        let tools = catalog(10, 100);
        let anyone = Caller::anyone();
        let whole = page(&tools, &anyone, None, PAGE_BYTES).unwrap();
        assert_eq!(whole.tools.len(), 10);
        assert!(whole.next.is_none());
        // Three tools' worth a page.
        let budget = 3 * size_hint(&tools.values().next().unwrap().clone()) + 10;
        let (mut seen, mut cursor, mut pages) = (Vec::new(), None, 0);
        loop {
            let listed = page(&tools, &anyone, cursor.as_deref(), budget).unwrap();
            assert!(!listed.tools.is_empty() && listed.tools.len() <= 3);
            seen.extend(names(&listed.tools).into_iter().map(str::to_owned));
            pages += 1;
            match listed.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(pages, 4);
        assert_eq!(seen, names(&whole.tools));
        // A tool bigger than the budget still gets a page of its own.
        assert_eq!(page(&tools, &anyone, None, 1).unwrap().tools.len(), 1);
    }

    #[test]
    fn a_cursor_is_an_exposed_name_and_one_removed_since_starts_at_the_next() {
        let mut tools = catalog(5, 10);
        let anyone = Caller::anyone();
        for bad in ["", "t 01", "t_01\"", "ü"] {
            assert!(
                page(&tools, &anyone, Some(bad), PAGE_BYTES).is_err(),
                "{bad:?}"
            );
        }
        tools.retain(|name, _| name.as_str() != "t_02");
        let rest = page(&tools, &anyone, Some("t_02"), PAGE_BYTES).unwrap();
        assert_eq!(names(&rest.tools), ["t_03", "t_04"]);
    }

    #[test]
    fn an_answer_in_pieces_is_the_json_rmcp_would_send() {
        // ~100 KB a tool: the answer takes several pieces.
        let tools = catalog(8, 100_000);
        let budget = 6 * size_hint(&tools.values().next().unwrap().clone());
        let listed = page(&tools, &Caller::anyone(), None, budget).unwrap();
        let expected = rmcp_json(&listed.tools);
        let next = listed.next.clone().unwrap();
        let answer = ToolsListAnswer::new(listed, &RequestId::Number(9)).unwrap();
        let pieces: Vec<Bytes> = answer.map(Result::unwrap).collect();
        assert!(pieces.len() >= 2, "{} pieces", pieces.len());
        assert!(pieces[..pieces.len() - 1].iter().all(|p| p.len() >= PIECE));
        let whole: Vec<u8> = pieces.concat();
        let message: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(message["jsonrpc"], "2.0");
        assert_eq!(message["id"], 9);
        assert_eq!(message["result"]["nextCursor"], next.as_str());
        assert_eq!(message["result"]["tools"], Value::Array(expected));
    }

    /// A generated tool: its name, description, its annotations' title, schema keys, whether it
    /// declares an output schema, and its own title and icons' sources.
    type Drawn = (
        String,
        String,
        Option<String>,
        Vec<String>,
        bool,
        (Option<String>, Vec<String>),
    );

    /// A tool whose texts hold anything JSON must escape, with a schema of any keys.
    fn any_tool() -> impl proptest::strategy::Strategy<Value = Drawn> {
        use proptest::prelude::*;
        (
            "[a-z][a-z0-9_]{0,10}",
            "[\\x00-\\x1f\"\\\\/é€😀a-z \u{2028}]{0,40}",
            proptest::option::of("[\"\\\\a-zé\\x01]{0,12}"),
            proptest::collection::vec("[\"\\\\a-z\\x7f]{0,6}", 0..4),
            any::<bool>(),
            (
                proptest::option::of("[\"\\\\a-zé]{0,8}"),
                proptest::collection::vec("https://[a-z\"]{1,8}", 0..3),
            ),
        )
    }

    fn catalog_of(tools: Vec<Drawn>) -> BTreeMap<ExposedName, Arc<ExposedTool>> {
        tools
            .into_iter()
            .map(
                |(original, description, title, keys, with_output, (own, icons))| {
                    let properties: Map<String, Value> = keys
                        .into_iter()
                        .map(|key| (key, json!({"type": "string"})))
                        .collect();
                    let input = json!({"type": "object", "properties": properties});
                    let Value::Object(input) = input else {
                        unreachable!()
                    };
                    let annotations = Annotations {
                        title,
                        ..Annotations::default()
                    };
                    let spec = ToolSpec::new(
                        ToolName::new(&original),
                        description,
                        input.clone(),
                        with_output.then_some(&input),
                        annotations,
                    )
                    .shown_as(
                        own,
                        icons
                            .into_iter()
                            .map(|src| Icon {
                                src,
                                ..Icon::default()
                            })
                            .collect(),
                    );
                    exposed(&original, spec)
                },
            )
            .collect()
    }

    proptest::proptest! {
        /// The hand-written answer against rmcp's types: for any tools (texts that need
        /// escaping, any schema keys) and any page budget, following the cursors lists every
        /// tool once, and each page's bytes are the JSON rmcp would send for it.
        #[test]
        fn every_page_written_by_hand_is_the_json_rmcp_would_send(
            tools in proptest::collection::vec(any_tool(), 0..12),
            budget in 1usize..2_000,
        ) {
            let tools = catalog_of(tools);
            let anyone = Caller::anyone();
            let (mut seen, mut cursor) = (Vec::new(), None::<String>);
            loop {
                let listed = page(&tools, &anyone, cursor.as_deref(), budget).unwrap();
                let expected = rmcp_json(&listed.tools);
                seen.extend(names(&listed.tools).into_iter().map(str::to_owned));
                let next = listed.next.clone();
                let answer = ToolsListAnswer::new(listed, &RequestId::Number(1)).unwrap();
                let whole: Vec<u8> = answer.map(Result::unwrap).collect::<Vec<Bytes>>().concat();
                let message: Value = serde_json::from_slice(&whole).unwrap();
                proptest::prop_assert_eq!(&message["result"]["tools"], &Value::Array(expected));
                proptest::prop_assert_eq!(message["result"].get("nextCursor").and_then(Value::as_str), next.as_deref());
                match next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            let all: Vec<String> = tools.keys().map(|name| name.as_str().to_owned()).collect();
            proptest::prop_assert_eq!(seen, all);
        }
    }
}
