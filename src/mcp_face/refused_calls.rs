//! The `tools/call` requests in a POST the gate refused (no or wrong credentials), found so
//! that each gets its audit line, as a refused `CallTool` does over gRPC: its tool, no caller.

use serde_json::Value;

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

/// Every `tools/call` request of a JSON-RPC body (one message or a batch), in order; none when
/// the body is not JSON. A call without a string `params.name` names no tool and is skipped.
pub fn tool_calls(body: &[u8]) -> Vec<RefusedCall> {
    let messages = match serde_json::from_slice(body) {
        Ok(Value::Array(messages)) => messages,
        Ok(message) => vec![message],
        Err(_) => Vec::new(),
    };
    messages.into_iter().filter_map(tool_call).collect()
}

fn tool_call(mut message: Value) -> Option<RefusedCall> {
    if message.get("method")?.as_str()? != "tools/call" {
        return None;
    }
    let params = message.get_mut("params")?;
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
            [RefusedCall {
                tool: "d_echo".into(),
                arguments: json!({"message": "hi"}),
                trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()),
            }]
        );
    }

    #[test]
    fn a_batch_gives_each_call_and_nothing_else() {
        let body = json!([
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "a"}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 5}},
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "b", "arguments": null}},
        ]);
        let calls = tool_calls(body.to_string().as_bytes());
        let tools: Vec<(&str, &Value)> = calls
            .iter()
            .map(|call| (call.tool.as_str(), &call.arguments))
            .collect();
        assert_eq!(tools, [("a", &json!({})), ("b", &json!({}))]);
        assert!(calls.iter().all(|call| call.trace_id.is_none()));
    }

    #[test]
    fn a_body_that_is_not_json_rpc_gives_none() {
        for body in [&b"not json"[..], b"", b"42", br#"{"method":"tools/call"}"#] {
            assert_eq!(tool_calls(body), [], "{:?}", String::from_utf8_lossy(body));
        }
    }
}
