//! SearchTools: the query run against the revision's index, the matches filtered by what the
//! request may see, and returned as ListTools gives tools.

use std::sync::Arc;

use super::{tool_cache::CachedTools, visibility::Visibility};
use crate::{core::broker::Snapshot, domain::request_error::RequestError, proto};

/// Matches when the request gives no limit.
pub const DEFAULT_LIMIT: usize = 10;
/// The most matches one response holds; a larger limit is taken as this.
pub const MAX_LIMIT: usize = 100;

/// The best matches for `query` among the tools `visibility` lets the caller see.
pub async fn search(
    query: &str,
    limit: u32,
    visibility: &Visibility,
    cached: &CachedTools,
    snapshot: Arc<Snapshot>,
) -> Result<proto::SearchToolsResponse, RequestError> {
    if query.trim().is_empty() {
        return Err(RequestError::EmptyQuery);
    }
    let limit = match limit as usize {
        0 => DEFAULT_LIMIT,
        asked => asked.min(MAX_LIMIT),
    };
    let found = cached
        .index(snapshot)
        .await
        .search(query, limit, visibility.keep(&cached.exposed));
    let matches = found
        .into_iter()
        .map(|(i, score)| proto::ToolMatch {
            tool: Some(cached.encoded.tool(i)),
            score: f64::from(score),
        })
        .collect();
    Ok(proto::SearchToolsResponse {
        matches,
        revision: cached.revision,
    })
}
