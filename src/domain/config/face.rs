//! The MCP face's own settings: the browser origins it accepts besides the loopback ones
//! (`mcp_allowed_origins`) and how many client sessions it keeps (`mcp_sessions_per_caller`,
//! `mcp_max_sessions`). Pure.

use serde_json::Value;

use super::{path, validate::Checker};
use crate::domain::origin::AllowedOrigin;

/// Sessions one caller may keep open on the MCP face, when the file gives none.
pub const DEFAULT_MCP_SESSIONS_PER_CALLER: usize = 16;
/// Sessions the MCP face keeps open in all, when the file gives none.
pub const DEFAULT_MCP_MAX_SESSIONS: usize = 10_000;
/// The most sessions either setting may allow: each holds tens of KiB.
pub const MAX_MCP_SESSIONS: u64 = 100_000;

/// What the MCP face accepts and keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpFace {
    /// Browser origins accepted besides the loopback ones.
    pub allowed_origins: Vec<AllowedOrigin>,
    /// Sessions one caller may keep open.
    pub sessions_per_caller: usize,
    /// Sessions kept open in all.
    pub max_sessions: usize,
}

impl Default for McpFace {
    fn default() -> Self {
        Self {
            allowed_origins: Vec::new(),
            sessions_per_caller: DEFAULT_MCP_SESSIONS_PER_CALLER,
            max_sessions: DEFAULT_MCP_MAX_SESSIONS,
        }
    }
}

impl Checker<'_, '_> {
    /// `mcp_allowed_origins`, `mcp_sessions_per_caller` and `mcp_max_sessions`.
    pub(super) fn mcp_face(
        &mut self,
        origins: Option<Value>,
        per_caller: Option<u64>,
        max: Option<u64>,
    ) -> McpFace {
        McpFace {
            allowed_origins: self.allowed_origins(origins),
            sessions_per_caller: self.count(
                per_caller,
                DEFAULT_MCP_SESSIONS_PER_CALLER,
                1..=MAX_MCP_SESSIONS,
                "mcp_sessions_per_caller",
            ),
            max_sessions: self.count(
                max,
                DEFAULT_MCP_MAX_SESSIONS,
                1..=MAX_MCP_SESSIONS,
                "mcp_max_sessions",
            ),
        }
    }

    /// A list of origin patterns, each checked.
    fn allowed_origins(&mut self, raw: Option<Value>) -> Vec<AllowedOrigin> {
        const AT: &str = "mcp_allowed_origins";
        let items = match raw {
            None | Some(Value::Null) => return Vec::new(),
            Some(Value::Array(items)) => items,
            Some(other) => {
                let reason = format!(
                    "expected a list of origins like [\"https://app.example.com\"], found {}",
                    super::validate::kind(&other)
                );
                self.error(AT, reason);
                return Vec::new();
            }
        };
        let mut allowed = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            let at = path::index(AT, i);
            let parsed = match &item {
                Value::String(text) => self
                    .expand(text, &at)
                    .map(|text| AllowedOrigin::parse(&text)),
                other => Some(Err(format!(
                    "expected an origin like \"https://app.example.com\", found {}",
                    super::validate::kind(other)
                ))),
            };
            match parsed {
                Some(Ok(origin)) => allowed.push(origin),
                Some(Err(reason)) => self.error(&at, reason),
                None => {}
            }
        }
        allowed
    }
}
