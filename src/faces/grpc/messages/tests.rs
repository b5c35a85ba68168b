use rmcp::model::{CallToolResult, ContentBlock, EmbeddedResource, Resource, ResourceContents};
use serde_json::json;

use super::*;

fn server() -> ServerName {
    ServerName::parse("s").unwrap()
}

fn kinds(response: &proto::CallToolResponse) -> Vec<&Kind> {
    response
        .content
        .iter()
        .map(|c| c.kind.as_ref().unwrap())
        .collect()
}

#[test]
fn every_content_kind_arrives_intact() {
    let png = [0x89, b'P', b'N', b'G'];
    let result = CallToolResult::success(vec![
        ContentBlock::text("one"),
        ContentBlock::image(STANDARD.encode(png), "image/png"),
        ContentBlock::audio(STANDARD.encode(b"RIFF"), "audio/wav"),
        ContentBlock::Resource(EmbeddedResource::new(ResourceContents::text(
            "body", "demo://t",
        ))),
        ContentBlock::Resource(EmbeddedResource::new(
            ResourceContents::BlobResourceContents {
                uri: "demo://b".into(),
                mime_type: Some("application/octet-stream".into()),
                blob: STANDARD.encode([0u8, 1, 2]),
                meta: None,
            },
        )),
        ContentBlock::ResourceLink(
            Resource::new("demo://l", "linked")
                .with_description("a link")
                .with_mime_type("text/plain")
                .with_size(7),
        ),
        ContentBlock::text("two"),
    ]);
    let response = call_response(&server(), result).unwrap();
    assert_eq!(response.text, "one\ntwo");
    assert_eq!(response.server, "s");
    assert!(!response.is_error);
    let kinds = kinds(&response);
    assert!(matches!(kinds[0], Kind::Text(t) if t.text == "one"));
    assert!(matches!(kinds[1], Kind::Image(i) if i.data == png && i.mime_type == "image/png"));
    assert!(matches!(kinds[2], Kind::Audio(a) if a.data == b"RIFF" && a.mime_type == "audio/wav"));
    assert!(matches!(kinds[3], Kind::Resource(r)
        if r.uri == "demo://t" && r.mime_type == "text/plain" && r.contents == Some(Contents::Text("body".into()))));
    assert!(matches!(kinds[4], Kind::Resource(r)
        if r.contents == Some(Contents::Blob(vec![0, 1, 2]))));
    assert!(matches!(kinds[5], Kind::ResourceLink(l)
        if l.uri == "demo://l" && l.name == "linked" && l.description == "a link" && l.size == Some(7)));
}

#[test]
fn structured_content_and_tool_errors_pass_through() {
    let mut result = CallToolResult::structured(json!({"sum": 3, "items": [1, 2]}));
    result.is_error = Some(true);
    let response = call_response(&server(), result).unwrap();
    assert!(response.is_error);
    assert_eq!(
        response.structured_content_json,
        r#"{"sum":3,"items":[1,2]}"#
    );
}

#[test]
fn invalid_base64_is_a_bad_result() {
    let result = CallToolResult::success(vec![ContentBlock::image("not base64!", "image/png")]);
    let err = call_response(&server(), result).unwrap_err();
    assert!(
        matches!(&err, RequestError::BadResult { reason, .. } if reason.contains("image data is not valid base64")),
        "{err:?}"
    );
}

#[test]
fn negative_timeouts_are_invalid() {
    let negative = prost_types::Duration {
        seconds: -1,
        nanos: 0,
    };
    assert!(matches!(
        duration(negative),
        Err(RequestError::InvalidArguments(_))
    ));
    let ok = prost_types::Duration {
        seconds: 1,
        nanos: 500_000_000,
    };
    assert_eq!(duration(ok).unwrap(), Duration::from_millis(1500));
}
