//! The `tools/call` requests in a POST the gate refused (no or wrong credentials), found so
//! that the request gets its audit line, as a refused `CallTool` does over gRPC: its tool, no
//! caller. A batch of them is one line with their count (a stranger's body must not cost a
//! line per call), so only the first is kept; the others are only counted, each message read
//! without building a tree of the body.

use std::{borrow::Cow, fmt};

use serde::{
    Deserialize, Deserializer,
    de::{SeqAccess, Visitor},
};
use serde_json::{Value, value::RawValue};

use crate::telemetry::context::trace_id_of;

/// One `tools/call` found in a refused request's body.
#[derive(Debug, PartialEq)]
pub struct RefusedCall {
    /// The tool name it asked for.
    pub tool: String,
    /// Its arguments as sent (`{}` when it gave none).
    pub arguments: Value,
    /// The trace its `params._meta` names, if it names one.
    pub trace_id: Option<String>,
}

/// The `tools/call`s of a refused body: the first, and how many there are.
#[derive(Debug, PartialEq)]
pub struct RefusedCalls {
    /// The first call.
    pub first: RefusedCall,
    /// How many calls the body holds (at least 1).
    pub count: usize,
}

/// The `tools/call` requests of a JSON-RPC body (one message or a batch); none when the body
/// is not JSON or holds none. A call without a string `params.name` names no tool and is
/// not counted.
pub fn tool_calls(body: &[u8]) -> Option<RefusedCalls> {
    let first = body.iter().find(|byte| !byte.is_ascii_whitespace())?;
    if *first == b'[' {
        let mut deserializer = serde_json::Deserializer::from_slice(body);
        deserializer.deserialize_seq(Batch).ok()?
    } else {
        let message: Message<'_> = serde_json::from_slice(body).ok()?;
        let first = message.call()?;
        Some(RefusedCalls { first, count: 1 })
    }
}

/// One JSON-RPC message, as little of it as tells whether it is a call and of which tool.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// A call's params, read only to learn that its `name` is a string.
#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow, rename = "name")]
    _name: Cow<'a, str>,
}

impl Message<'_> {
    /// Whether it is a `tools/call` naming its tool.
    fn is_call(&self) -> bool {
        self.method.as_deref() == Some("tools/call")
            && self
                .params
                .is_some_and(|params| serde_json::from_str::<Params<'_>>(params.get()).is_ok())
    }

    /// The call, read whole, if it is one.
    fn call(&self) -> Option<RefusedCall> {
        if !self.is_call() {
            return None;
        }
        let mut params: Value = serde_json::from_str(self.params?.get()).ok()?;
        let tool = params.get("name")?.as_str()?.to_owned();
        let trace_id = params
            .pointer("/_meta/traceparent")
            .and_then(Value::as_str)
            .and_then(trace_id_of)
            .map(str::to_owned);
        let arguments = match params.get_mut("arguments").map(Value::take) {
            None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
            Some(arguments) => arguments,
        };
        Some(RefusedCall {
            tool,
            arguments,
            trace_id,
        })
    }
}

/// A batch, read one message at a time: the first call kept, the others counted.
struct Batch;

impl<'de> Visitor<'de> for Batch {
    type Value = Option<RefusedCalls>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC batch")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut messages: A) -> Result<Self::Value, A::Error> {
        let mut calls: Option<RefusedCalls> = None;
        // A message that is not an object (or not JSON-RPC) is no call.
        while let Some(message) = messages.next_element::<Lenient<'de>>()? {
            let Some(message) = message.0.filter(Message::is_call) else {
                continue;
            };
            match &mut calls {
                Some(calls) => calls.count += 1,
                None => {
                    calls = message.call().map(|first| RefusedCalls { first, count: 1 });
                }
            }
        }
        Ok(calls)
    }
}

/// A batch's element: a message, or `None` for anything else.
struct Lenient<'a>(Option<Message<'a>>);

impl<'de> Deserialize<'de> for Lenient<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        Ok(Lenient(serde_json::from_str(raw.get()).ok()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_call_gives_its_tool_arguments_and_trace() {
        let body = json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "d_echo", "arguments": {"message": "hi"},
                       "_meta": {"traceparent": PARENT}},
        });
        assert_eq!(
            tool_calls(body.to_string().as_bytes()),
            Some(RefusedCalls {
                first: RefusedCall {
                    tool: "d_echo".into(),
                    arguments: json!({"message": "hi"}),
                    trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()),
                },
                count: 1,
            })
        );
    }

    #[test]
    fn a_batch_gives_its_first_call_and_counts_the_calls_only() {
        let body = json!([
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "a"}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 5}},
            7,
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "b", "arguments": null}},
            {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "c"}},
        ]);
        let calls = tool_calls(body.to_string().as_bytes()).unwrap();
        assert_eq!(calls.count, 3);
        assert_eq!(
            calls.first,
            RefusedCall {
                tool: "a".into(),
                arguments: json!({}),
                trace_id: None,
            }
        );
    }

    #[test]
    fn a_thousand_calls_in_one_body_are_one_first_call_and_a_count() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "d_echo", "arguments": {"message": "x"}}});
        let body = serde_json::to_vec(&vec![call; 1000]).unwrap();
        let calls = tool_calls(&body).unwrap();
        assert_eq!((calls.first.tool.as_str(), calls.count), ("d_echo", 1000));
    }

    #[test]
    fn a_body_that_is_not_json_rpc_gives_none() {
        let bodies: [&[u8]; 8] = [
            b"not json",
            b"",
            b"42",
            br#"{"method":"tools/call"}"#,
            br#"{"method":"tools/list","params":{"name":"a"}}"#,
            b"[]",
            b"[1, 2",
            br#"[{"method":"tools/call","params":{"name":"a"}}"#,
        ];
        for body in bodies {
            assert_eq!(
                tool_calls(body),
                None,
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
