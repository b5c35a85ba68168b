//! What a client of MCP 2026-07-28 is told about an answer, the same on both faces: every
//! answer is `resultType: "complete"` unless it asks for input, and lists, `server/discover`
//! and `resources/read` say how long they may be reused (`ttlMs`) and by whom (`cacheScope`).
//! Pure.
//!
//! The rules: the catalog's lists may be reused for [`LIST_TTL_MS`] (a client that listens is
//! told of a change at once; one that does not sees it within that time), by anyone
//! (`public`) unless what the list holds depends on who asks: a caller whose grants restrict
//! it, or a per-caller server among what it sees (`private`). A resource's content may be
//! reused as long as its server said, and not at all when it said nothing; `private` when its
//! server said so or the same rules as the lists' make it so. rmcp leaves `resultType` out of
//! an answer it did not build (one read from a server before 2026-07-28), and fills absent
//! hints with `0` / `private`; these rules say what the broker knows instead.

use rmcp::{
    ServerHandler,
    model::{
        CacheScope, DiscoverResult, ListPromptsResult, ListResourceTemplatesResult,
        ListResourcesResult, ListToolsResult, MetaObject, ProtocolVersion, ReadResourceResult,
        ResultType,
    },
};

/// How long the catalog's lists (and `server/discover`) may be reused, in milliseconds.
pub const LIST_TTL_MS: u64 = 30_000;

/// Who may reuse an answer: `private` when it depends on who asked.
pub fn scope(depends_on_caller: bool) -> CacheScope {
    if depends_on_caller {
        CacheScope::Private
    } else {
        CacheScope::Public
    }
}

/// The hints of a list: [`LIST_TTL_MS`], and the scope [`scope`] gives.
pub fn list_hints(depends_on_caller: bool) -> (u64, CacheScope) {
    (LIST_TTL_MS, scope(depends_on_caller))
}

/// The hints of a resource's content: the reuse its server allowed (none when it said
/// nothing), `private` when the server said so or it depends on the caller.
pub fn read_hints(
    server_ttl_ms: Option<u64>,
    server_scope: Option<&CacheScope>,
    depends_on_caller: bool,
) -> (u64, CacheScope) {
    let private = depends_on_caller || matches!(server_scope, Some(CacheScope::Private));
    (server_ttl_ms.unwrap_or(0), scope(private))
}

/// What a face says of itself to `server/discover` (its versions and info, as rmcp's
/// default says them): the same for everyone, so anyone may reuse it as long as a list.
pub fn discovered(face: &impl ServerHandler) -> DiscoverResult {
    let versions = face.supported_protocol_versions().into_owned();
    let mut result = DiscoverResult::from_server_info(versions, face.get_info());
    (result.ttl_ms, result.cache_scope) = list_hints(false);
    result
}

/// Whether a request of `version` is owed the hints (2026-07-28 and later; an older client's
/// answers keep their shape).
pub fn owed(version: Option<&ProtocolVersion>) -> bool {
    version.is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// An answer that carries `ttlMs` and `cacheScope`.
pub trait Cacheable {
    /// Says how long it may be reused, and by whom.
    fn hint(&mut self, hints: (u64, CacheScope));
}

/// [`Cacheable`] for rmcp's results that have the two fields.
macro_rules! cacheable {
    ($($result:ty),*) => {$(
        impl Cacheable for $result {
            fn hint(&mut self, (ttl_ms, scope): (u64, CacheScope)) {
                self.ttl_ms = Some(ttl_ms);
                self.cache_scope = Some(scope);
            }
        }
    )*};
}

cacheable!(
    ListToolsResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ReadResourceResult
);

/// Where a 2026-07-28 answer names the server that gave it.
const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// An answer of a server as the face gives it, as its own: its `resultType` `complete` when
/// the server gave none (rmcp drops it again for a client before 2026-07-28), and without the
/// server's `serverInfo` (which names the server answering: the broker).
pub fn complete(result_type: &mut Option<ResultType>, meta: &mut Option<MetaObject>) {
    result_type.get_or_insert(ResultType::COMPLETE);
    if let Some(object) = meta {
        object.remove(SERVER_INFO);
        if object.is_empty() {
            *meta = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_public_unless_it_depends_on_the_caller() {
        assert_eq!(list_hints(false), (LIST_TTL_MS, CacheScope::Public));
        assert_eq!(list_hints(true), (LIST_TTL_MS, CacheScope::Private));
    }

    #[test]
    fn a_read_keeps_its_servers_reuse_and_privacy() {
        assert_eq!(read_hints(None, None, false), (0, CacheScope::Public));
        assert_eq!(
            read_hints(Some(5_000), Some(&CacheScope::Public), false),
            (5_000, CacheScope::Public)
        );
        assert_eq!(
            read_hints(Some(5_000), Some(&CacheScope::Private), false),
            (5_000, CacheScope::Private)
        );
        assert_eq!(
            read_hints(Some(5_000), Some(&CacheScope::Public), true),
            (5_000, CacheScope::Private)
        );
    }

    #[test]
    fn hints_are_owed_from_2026_07_28_on() {
        assert!(owed(Some(&ProtocolVersion::V_2026_07_28)));
        assert!(!owed(Some(&ProtocolVersion::V_2025_11_25)));
        assert!(!owed(None));
    }

    #[test]
    fn a_servers_name_is_not_passed_on_and_its_other_meta_is() {
        let mut named = Some(MetaObject(
            serde_json::json!({SERVER_INFO: {"name": "upstream"}, "x": 1})
                .as_object()
                .unwrap()
                .clone(),
        ));
        complete(&mut None, &mut named);
        assert_eq!(
            named.unwrap().0,
            *serde_json::json!({"x": 1}).as_object().unwrap()
        );
        let mut only_a_name = Some(MetaObject(
            serde_json::json!({SERVER_INFO: {"name": "upstream"}})
                .as_object()
                .unwrap()
                .clone(),
        ));
        complete(&mut None, &mut only_a_name);
        assert!(only_a_name.is_none());
    }

    #[test]
    fn an_answer_without_a_type_is_complete_and_one_with_a_type_keeps_it() {
        let mut none = None;
        complete(&mut none, &mut None);
        assert_eq!(none, Some(ResultType::COMPLETE));
        let mut asked = Some(ResultType::INPUT_REQUIRED);
        complete(&mut asked, &mut None);
        assert_eq!(asked, Some(ResultType::INPUT_REQUIRED));
    }
}
