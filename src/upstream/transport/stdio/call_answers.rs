//! Answers to `tools/call` decoded by the method that was sent. A JSON-RPC answer does not say
//! what it answers, so rmcp decodes every answer through its untagged `ServerResult` enum:
//! the message is buffered, then each result type is tried in turn, building an error for
//! each that does not fit. The transport knows which ids it sent as `tools/call`, so their
//! answers can be decoded straight into `CallToolResult`; anything else (and any answer that
//! does not decode that way) is left to rmcp's own decoding, unchanged.
//!
//! **What would let it go**: rmcp decoding an answer by the method of the request it answers
//! (its untagged `ServerResult` is 12 % of a call's CPU in round one's profile). Its property
//! tests hold it to rmcp: whatever a server answers, what is taken here is what rmcp decodes.

use std::collections::HashSet;

use rmcp::model::{
    CallToolResult, ClientRequest, JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::{RoleClient, service::TxJsonRpcMessage};
use serde::{Deserialize, de::IgnoredAny};
use serde_json::value::RawValue;

/// How many unanswered calls are remembered. A call that is never answered (cancelled, timed
/// out) would otherwise stay forever; past this, all are forgotten, and their answers, if
/// they come, take rmcp's general path, which decodes them just as well.
const REMEMBERED: usize = 4096;

/// The ids of the `tools/call` requests sent and not yet answered.
#[derive(Debug, Default)]
pub struct CallIds(HashSet<RequestId>);

impl CallIds {
    /// Notes `message` if it is a `tools/call` request.
    pub fn sent(&mut self, message: &TxJsonRpcMessage<RoleClient>) {
        if let JsonRpcMessage::Request(request) = message
            && matches!(request.request, ClientRequest::CallToolRequest(_))
        {
            if self.0.len() >= REMEMBERED {
                self.0.clear();
            }
            self.0.insert(request.id.clone());
        }
    }

    /// Whether no call awaits its answer.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The members of a JSON-RPC message that say what it is, its result or error left undecoded.
#[derive(Deserialize)]
pub struct Envelope<'a> {
    #[allow(dead_code)] // Decoding it checks the version.
    jsonrpc: JsonRpcVersion2_0,
    /// The request's id (`None` in a notification).
    pub id: Option<RequestId>,
    /// Present in a request or notification.
    pub method: Option<IgnoredAny>,
    /// An answer's result.
    #[serde(borrow)]
    pub result: Option<&'a RawValue>,
    /// An answer's error.
    #[serde(borrow)]
    pub error: Option<&'a RawValue>,
}

/// `line` as the answer to one of `calls`, decoded as a `CallToolResult`; `None` when it is
/// anything else or does not decode so (then rmcp's own decoding takes it). An answer to one
/// of `calls`, of whatever kind, ends its remembering.
pub fn call_answer(line: &[u8], calls: &mut CallIds) -> Option<ServerJsonRpcMessage> {
    let envelope: Envelope = serde_json::from_slice(line).ok()?;
    if envelope.method.is_some() {
        // A request from the server: its ids are its own, and may equal ours.
        return None;
    }
    let id = envelope.id?;
    if !calls.0.remove(&id) || envelope.error.is_some() {
        return None;
    }
    let result: CallToolResult = serde_json::from_str(envelope.result?.get()).ok()?;
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: JsonRpcVersion2_0,
        id,
        result: ServerResult::CallToolResult(result),
    }))
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, NumberOrString, PingRequest,
    };

    use super::*;

    fn call(id: i64) -> ClientJsonRpcMessage {
        JsonRpcMessage::request(
            ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new(
                "echo",
            ))),
            NumberOrString::Number(id),
        )
    }

    fn sent(ids: &[i64]) -> CallIds {
        let mut calls = CallIds::default();
        for &id in ids {
            calls.sent(&call(id));
        }
        calls
    }

    /// What rmcp's own decoding makes of `line`, as JSON (its results have no `PartialEq`).
    fn general(line: &str) -> serde_json::Value {
        let message: ServerJsonRpcMessage = serde_json::from_str(line).expect("rmcp decodes it");
        serde_json::to_value(message).expect("serializable")
    }

    /// `message` as JSON, checked to be a `CallToolResult` answer.
    fn json(message: ServerJsonRpcMessage) -> serde_json::Value {
        let JsonRpcMessage::Response(response) = &message else {
            panic!("not an answer: {message:?}");
        };
        assert!(matches!(response.result, ServerResult::CallToolResult(_)));
        serde_json::to_value(message).expect("serializable")
    }

    #[test]
    fn an_answer_to_a_call_decodes_as_rmcp_decodes_it() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}],"isError":false}}"#,
            r#"{"id":7,"result":{"structuredContent":{"a":[1,2]},"content":[],"_meta":{"k":"v"}},"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}}"#,
        ];
        for line in lines {
            let mut calls = sent(&[7]);
            let fast = call_answer(line.as_bytes(), &mut calls).expect("taken by method");
            assert_eq!(json(fast), general(line), "{line}");
            assert!(calls.is_empty(), "answered, so forgotten");
        }
    }

    #[test]
    fn other_messages_are_left_to_rmcp() {
        let mut calls = sent(&[7]);
        let others = [
            // Not a call of ours.
            r#"{"jsonrpc":"2.0","id":8,"result":{"content":[]}}"#,
            // A request from the server with an id equal to ours.
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
            // A notification.
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
            // Not JSON-RPC 2.0.
            r#"{"jsonrpc":"1.0","id":7,"result":{"content":[]}}"#,
        ];
        for line in others {
            assert!(call_answer(line.as_bytes(), &mut calls).is_none(), "{line}");
        }
        assert!(!calls.is_empty(), "7 is still awaited");
    }

    #[test]
    fn an_error_or_an_odd_result_ends_the_call_and_goes_to_rmcp() {
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"no such tool"}}"#,
            // No known CallToolResult member: rmcp decides what it is.
            r#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required","inputRequests":{}}}"#,
        ] {
            let mut calls = sent(&[7]);
            assert!(call_answer(line.as_bytes(), &mut calls).is_none(), "{line}");
            assert!(calls.is_empty(), "{line}");
        }
    }

    #[test]
    fn only_calls_are_remembered_and_never_without_bound() {
        let mut calls = CallIds::default();
        calls.sent(&JsonRpcMessage::request(
            ClientRequest::PingRequest(PingRequest::default()),
            NumberOrString::Number(1),
        ));
        assert!(calls.is_empty());
        let many: Vec<i64> = (0..REMEMBERED as i64 + 10).collect();
        assert!(sent(&many).0.len() <= REMEMBERED);
    }

    #[test]
    fn string_ids_work_too() {
        let mut calls = CallIds::default();
        calls.sent(&JsonRpcMessage::request(
            ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("x"))),
            NumberOrString::String("a-1".into()),
        ));
        let line = r#"{"jsonrpc":"2.0","id":"a-1","result":{"content":[]}}"#;
        let fast = call_answer(line.as_bytes(), &mut calls).expect("taken by method");
        assert_eq!(json(fast), general(line));
    }

    /// A JSON value of bounded depth and size, with any strings.
    fn any_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            ".{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::btree_map(".{0,6}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// An answer line as a server might write it: a result that may or may not be a tool
    /// result (known members, odd ones, wrong types), an error, or a request with our id.
    fn answer_line() -> impl proptest::strategy::Strategy<Value = (i64, String)> {
        use proptest::prelude::*;
        let block = prop_oneof![
            ".{0,16}".prop_map(|text| serde_json::json!({"type": "text", "text": text})),
            any_json().prop_map(|v| serde_json::json!({"type": "text", "text": v})),
            any_json(),
        ];
        let result = (
            proptest::collection::vec(block, 0..3),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any_json()),
            proptest::option::of(any_json()),
        )
            .prop_map(|(content, is_error, structured, extra)| {
                let mut result = serde_json::json!({"content": content});
                if let Some(is_error) = is_error {
                    result["isError"] = is_error.into();
                }
                if let Some(structured) = structured {
                    result["structuredContent"] = structured;
                }
                if let Some(extra) = extra {
                    result["_meta"] = extra;
                }
                result
            });
        let message = prop_oneof![
            4 => result.prop_map(|r| serde_json::json!({"result": r})),
            1 => any_json().prop_map(|r| serde_json::json!({"result": r})),
            1 => Just(serde_json::json!({"error": {"code": -32603, "message": "no"}})),
            1 => Just(serde_json::json!({"method": "ping"})),
        ];
        (0i64..4, message).prop_map(|(id, mut message)| {
            message["jsonrpc"] = "2.0".into();
            message["id"] = id.into();
            (id, message.to_string())
        })
    }

    proptest::proptest! {
        /// The seam beside rmcp's decoding: whatever a server answers, an answer taken here
        /// is what rmcp makes of the same line, and only an answer to a call sent is taken.
        #[test]
        fn an_answer_taken_here_is_what_rmcp_decodes((id, line) in answer_line(), sent_id in 0i64..4) {
            let mut calls = sent(&[sent_id]);
            match call_answer(line.as_bytes(), &mut calls) {
                Some(fast) => {
                    proptest::prop_assert_eq!(id, sent_id);
                    proptest::prop_assert_eq!(json(fast), general(&line));
                    proptest::prop_assert!(calls.is_empty());
                }
                None => {
                    let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
                    let ours = id == sent_id && parsed.get("method").is_none();
                    proptest::prop_assert_eq!(calls.is_empty(), ours, "{}", line);
                }
            }
        }

        /// Any bytes at all: never a panic, and nothing taken that is not an answer.
        #[test]
        fn any_bytes_are_taken_or_left_without_a_panic(line in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let mut calls = sent(&[0, 1]);
            if let Some(fast) = call_answer(&line, &mut calls) {
                proptest::prop_assert!(matches!(fast, JsonRpcMessage::Response(_)));
            }
        }
    }
}
