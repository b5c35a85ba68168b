//! A 2026-07-28 client's `subscriptions/listen` cut to the resources its caller may read before
//! rmcp acknowledges it. rmcp asks the handler which subscriptions it accepts without saying who
//! asks, so without this the acknowledgment would name a resource the caller may not read (and
//! so tell it the resource exists) though no update of it would ever reach the caller.

use axum::{
    body::{Body, Bytes},
    extract::{Request, State},
    http::{Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse as _, Response},
};
use http_body_util::BodyExt as _;
use serde_json::Value;

use super::{Face, request::Asker};

/// The header a 2026-07-28 request names its method in (rmcp refuses a request without it).
const MCP_METHOD: &str = "mcp-method";
/// The method narrowed.
const LISTEN: &str = "subscriptions/listen";

/// Narrows a `subscriptions/listen` POST to what its caller may read; passes anything else on.
pub async fn narrow(State(face): State<Face>, request: Request, next: Next) -> Response {
    let listens = request.method() == Method::POST
        && request
            .headers()
            .get(MCP_METHOD)
            .is_some_and(|method| method.as_bytes() == LISTEN.as_bytes());
    if !listens {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => {
            let message = format!("Bad Request: the body could not be read: {error}");
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    let caller = Asker::of_parts(Some(&parts)).caller(&face.broker().snapshot().views);
    let body = match narrowed(&body, |uri| face.server_of(&caller, uri).is_some()) {
        Some(narrowed) => {
            parts
                .headers
                .insert(header::CONTENT_LENGTH, narrowed.len().into());
            narrowed
        }
        None => body,
    };
    next.run(Request::from_parts(parts, Body::from(body))).await
}

/// `body` with its listen request's resource subscriptions cut to those `readable` allows;
/// `None` when it is no such request (it goes on as it came).
fn narrowed(body: &[u8], readable: impl Fn(&str) -> bool) -> Option<Bytes> {
    let mut message: Value = serde_json::from_slice(body).ok()?;
    if message["method"] != LISTEN {
        return None;
    }
    let uris = message
        .pointer_mut("/params/notifications/resourceSubscriptions")?
        .as_array_mut()?;
    uris.retain(|uri| uri.as_str().is_some_and(&readable));
    serde_json::to_vec(&message).ok().map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn listen(uris: &[&str]) -> Vec<u8> {
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": LISTEN, "params": {
            "notifications": {"toolsListChanged": true, "resourceSubscriptions": uris}}});
        serde_json::to_vec(&message).unwrap()
    }

    #[test]
    fn only_readable_resources_are_asked_for() {
        let readable = |uri: &str| uri.starts_with("memo://");
        let body = narrowed(&listen(&["memo://a", "secret://b", "memo://c"]), readable).unwrap();
        let message: Value = serde_json::from_slice(&body).unwrap();
        let notifications = &message["params"]["notifications"];
        assert_eq!(
            notifications["resourceSubscriptions"],
            json!(["memo://a", "memo://c"])
        );
        assert_eq!(
            notifications["toolsListChanged"], true,
            "the rest untouched"
        );
        assert_eq!(message["id"], 1);
    }

    #[test]
    fn anything_else_goes_on_as_it_came() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}});
        let call = serde_json::to_vec(&call).unwrap();
        assert!(narrowed(&call, |_| false).is_none());
        assert!(narrowed(b"not json", |_| false).is_none());
        let lists_only = json!({"jsonrpc": "2.0", "id": 1, "method": LISTEN,
            "params": {"notifications": {"toolsListChanged": true}}});
        assert!(narrowed(&serde_json::to_vec(&lists_only).unwrap(), |_| false).is_none());
    }
}
