//! A gRPC call's audit line: its draft read from the request (the caller the gate admitted or
//! refused, the arguments as sent), and its outcome from the response.

use tonic::{Extensions, metadata::MetadataMap};

use super::authenticate::Refused;
use crate::{
    auth::Caller,
    core::call_audit::{Answered, Draft, Pending},
    domain::request_error::RequestError,
    proto,
};

/// What is known of `call` before it runs: its caller (none if refused at the gate), its tool,
/// its trace and, `with_arguments`, its arguments.
pub(super) fn draft(
    call: &proto::CallToolRequest,
    metadata: &MetadataMap,
    extensions: &Extensions,
    with_arguments: bool,
) -> Draft {
    let caller = match (extensions.get::<Refused>(), extensions.get::<Caller>()) {
        (Some(_), _) => None,
        (None, Some(caller)) => Some(caller.key.clone()),
        (None, None) => Some(Caller::anyone().key),
    };
    let arguments = with_arguments.then(|| match &call.arguments {
        Some(structured) => proto::json::struct_to_json(structured.clone())
            .map_or_else(|e| serde_json::Value::String(e.to_string()), Into::into),
        None if call.arguments_json.trim().is_empty() => serde_json::json!({}),
        None => serde_json::from_str(&call.arguments_json)
            .unwrap_or_else(|_| serde_json::Value::String(call.arguments_json.clone())),
    });
    Draft::of(
        caller,
        call.name.clone(),
        crate::telemetry::current_trace_id(metadata),
        arguments,
    )
}

/// Writes the line of a call's outcome and waits for the write: the answer to send.
pub(super) async fn finish(
    pending: Pending<'_>,
    result: Result<proto::CallToolResponse, RequestError>,
) -> Result<proto::CallToolResponse, RequestError> {
    let answered = result.as_ref().map(|response| Answered {
        is_error: response.is_error,
        server: &response.server,
    });
    pending.commit(answered).settle(result).await
}
