//! `upstream::transport::sse::decode_body` on any bytes: the `sse-stream` parser and the reading of each
//! event must never panic, and an `endpoint` event is only ever accepted on the stream's own
//! origin (else a server could have the broker send its headers elsewhere).
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolbroker::upstream::transport::sse::{SseEvent, decode_body};
use url::Url;

fuzz_target!(|body: &[u8]| {
    let base = Url::parse("http://127.0.0.1:3001/sse").expect("a valid URL");
    for event in decode_body(body, &base) {
        if let Ok(SseEvent::Endpoint(Ok(endpoint))) = event {
            assert_eq!(endpoint.origin(), base.origin(), "accepted {endpoint}");
        }
    }
});
