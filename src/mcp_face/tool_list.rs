//! The face's `tools/list`, two ways.
//!
//! - [`Answer`]: the JSON-RPC answer written straight from the schema texts the catalog
//!   revision holds, for the requests the face answers itself, a piece at a time as the
//!   connection takes it. No schema is parsed, and nothing is kept: listing 10,002 tools
//!   through rmcp's types held ~270 MiB of parsed schemas for as long as the revision lasted.
//! - [`ToolList`]: the tools in rmcp's types, for the requests rmcp answers, converted once
//!   per catalog revision and shared by all sessions, so that a request only copies the
//!   entries its caller may use. Converting per request took ~20 ms of CPU for 1,000 tools.
//!
//! Both list the same tools with the same JSON (a test holds them to it).

use std::sync::Arc;

use bytes::Bytes;
use rmcp::model::{RequestId, Tool};

use super::convert;
use crate::{
    auth::Caller, broker::Snapshot, domain::tool::ExposedTool, latest_revision::LatestRevision,
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
                .map(|t| convert::tool(t))
                .collect()
        })
    }
}

/// How much of an [`Answer`] is written at a time: a whole answer of 10,002 tools is about
/// 20 MB, which sixteen clients listing at once would otherwise hold sixteen times over.
const PIECE: usize = 256 * 1024;

/// The JSON-RPC answer to one `tools/list` request: every tool of a revision that its caller
/// may use (exposed names, sorted), all in one page, as [`convert::tool`] declares them;
/// written in pieces of about 256 KiB as they are asked for.
pub struct Answer {
    /// The tools listed.
    tools: Vec<Arc<ExposedTool>>,
    /// How many are written.
    written: usize,
    /// The answer's opening, until the first piece takes it.
    opening: Vec<u8>,
    /// Whether the closing is written.
    closed: bool,
}

impl Answer {
    /// The answer to `tools/list` request `id` for `caller`, from `snapshot`'s revision.
    pub fn new(snapshot: &Snapshot, caller: &Caller, id: &RequestId) -> serde_json::Result<Self> {
        let tools = snapshot
            .catalog
            .tools()
            .values()
            .filter(|tool| caller.may_use(tool.name.as_str()))
            .cloned()
            .collect();
        let mut opening = br#"{"jsonrpc":"2.0","id":"#.to_vec();
        serde_json::to_writer(&mut opening, id)?;
        opening.extend_from_slice(br#","result":{"tools":["#);
        Ok(Self {
            tools,
            written: 0,
            opening,
            closed: false,
        })
    }

    /// Whether every piece has been taken.
    pub fn is_done(&self) -> bool {
        self.closed
    }
}

impl Iterator for Answer {
    type Item = serde_json::Result<Bytes>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.closed {
            return None;
        }
        let mut piece = std::mem::take(&mut self.opening);
        // Room for the piece and the tool that ends it: growing a buffer copies it.
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
                self.closed = true;
                return Some(Err(error));
            }
            self.written += 1;
        }
        if self.written == self.tools.len() {
            piece.extend_from_slice(b"]}}");
            self.closed = true;
        }
        Some(Ok(Bytes::from(piece)))
    }
}

/// About how long `tool`'s JSON is.
fn size_hint(tool: &ExposedTool) -> usize {
    let spec = &tool.spec;
    let output = spec.output_schema_json.as_deref().map_or(0, str::len);
    let title = spec.annotations.title.as_deref().map_or(0, str::len);
    tool.name.as_str().len()
        + spec.description.len()
        + spec.input_schema_json().len()
        + output
        + title
        + 192
}

/// One tool's JSON, its schemas copied as text. The texts are JSON objects by construction
/// ([`ToolSpec`](crate::domain::tool::ToolSpec) serializes them from parsed objects), so
/// they are not parsed again; were one not, it would go as [`convert::tool`] sends it (an
/// input schema as `{}`, no output schema).
fn write_tool(out: &mut Vec<u8>, tool: &ExposedTool) -> serde_json::Result<()> {
    let spec = &tool.spec;
    out.extend_from_slice(br#"{"name":"#);
    serde_json::to_writer(&mut *out, tool.name.as_str())?;
    out.extend_from_slice(br#","description":"#);
    serde_json::to_writer(&mut *out, &spec.description)?;
    out.extend_from_slice(br#","inputSchema":"#);
    let input = spec.input_schema_json();
    out.extend_from_slice(if is_object(&input) {
        input.as_bytes()
    } else {
        b"{}"
    });
    if let Some(output) = spec
        .output_schema_json
        .as_deref()
        .filter(|text| is_object(text))
    {
        out.extend_from_slice(br#","outputSchema":"#);
        out.extend_from_slice(output.as_bytes());
    }
    let hints = &spec.annotations;
    let annotations = convert::annotations(
        hints.title.clone(),
        [
            hints.read_only,
            hints.destructive,
            hints.idempotent,
            hints.open_world,
        ],
    );
    if let Some(annotations) = annotations {
        out.extend_from_slice(br#","annotations":"#);
        serde_json::to_writer(&mut *out, &annotations)?;
    }
    out.push(b'}');
    Ok(())
}

/// Whether JSON `text` is an object.
fn is_object(text: &str) -> bool {
    text.trim_start().starts_with('{')
}
