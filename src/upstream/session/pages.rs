//! Following a paginated list to its last page (`nextCursor`), refusing a server that loops.

use std::{collections::HashSet, future::Future};

use rmcp::model::{Cursor, PaginatedRequestParams};

use crate::domain::outcome::ListingFailure;

/// More pages than any real server sends; a server past it is looping.
const MAX_PAGES: usize = 10_000;

/// Every item of every page: `page(params)` fetches one page as its items and next cursor.
pub async fn all_pages<T, F, Fut>(mut page: F) -> Result<Vec<T>, ListingFailure>
where
    F: FnMut(PaginatedRequestParams) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<Cursor>), ListingFailure>>,
{
    let mut items = Vec::new();
    let mut seen = HashSet::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let (mut more, next) = page(params).await?;
        items.append(&mut more);
        match next {
            None => return Ok(items),
            Some(next) if !seen.insert(next.clone()) => {
                return Err(ListingFailure::RepeatedCursor(next));
            }
            Some(next) => cursor = Some(next),
        }
    }
    Err(ListingFailure::TooManyPages(MAX_PAGES))
}
