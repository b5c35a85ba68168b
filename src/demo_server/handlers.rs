//! What the demo tools do once their arguments are parsed. `sleep` waits on the clock and talks
//! to the peer, `ask` asks the client; the other handlers are pure functions from arguments to
//! results.

use std::time::Duration;

use rmcp::{
    ErrorData,
    model::{
        CallToolResponse, CallToolResult, ClientResult, ContentBlock, ElicitRequest,
        ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
        InputRequests, InputRequiredResult, InputResponses, JsonObject, ProgressNotificationParam,
        RequestMetaObject, ServerRequest,
    },
    service::{RequestContext, RoleServer},
};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::tools::{
    AddArgs, AskArgs, EchoArgs, FailArgs, NoArgs, SleepArgs, Stats, StatsArgs, WhoamiArgs,
};

/// Deserializes a tool's arguments; failure is the caller's mistake, so -32602 naming the problem.
pub(super) fn parse_args<T: DeserializeOwned>(
    tool: &str,
    args: JsonObject,
) -> Result<T, ErrorData> {
    serde_json::from_value(serde_json::Value::Object(args)).map_err(|error| {
        ErrorData::invalid_params(format!("invalid arguments for tool {tool}: {error}"), None)
    })
}

/// Checks that a tool without parameters got none.
pub(super) fn no_args(tool: &str, args: JsonObject) -> Result<(), ErrorData> {
    parse_args(tool, args).map(|NoArgs {}| ())
}

/// A successful result with one text block.
pub(super) fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// A tool error (`isError: true`) with one text block for the model to read.
pub(super) fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// `echo`.
pub(super) fn echo(args: EchoArgs) -> CallToolResult {
    text_result(args.message)
}

/// `add`.
pub(super) fn add(args: AddArgs) -> CallToolResult {
    match args.a.checked_add(args.b) {
        Some(sum) => text_result(sum.to_string()),
        None => tool_error(format!(
            "integer overflow: {} + {} does not fit in a signed 64-bit integer",
            args.a, args.b
        )),
    }
}

/// `stats`: the structured result, plus the same JSON as text for clients that predate
/// `structuredContent` (as MCP recommends).
pub(super) fn stats(args: StatsArgs) -> CallToolResult {
    let numbers = args.numbers;
    if numbers.is_empty() {
        return tool_error("numbers must contain at least one number");
    }
    let sum: f64 = numbers.iter().sum();
    let min = numbers.iter().copied().fold(f64::INFINITY, f64::min);
    let max = numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = sum / numbers.len() as f64;
    // JSON has no infinity: serde_json would write null and break the output schema.
    if !sum.is_finite() || !mean.is_finite() {
        return tool_error("the sum of the numbers is too large to represent");
    }
    let stats = Stats {
        count: numbers.len(),
        sum,
        min,
        max,
        mean,
    };
    let value = serde_json::to_value(&stats).expect("finite numbers always serialize");
    CallToolResult::structured(value)
}

/// `fail`.
pub(super) fn fail(args: FailArgs) -> CallToolResult {
    tool_error(
        args.message
            .unwrap_or_else(|| "this tool always fails".to_owned()),
    )
}

/// `echo_meta`: the request's `_meta` exactly as the client sent it, unknown keys included.
/// rmcp moves the wire `params._meta` into the request context; the params copy is merged in
/// too in case a transport leaves it there.
pub(super) fn echo_meta(
    params_meta: Option<RequestMetaObject>,
    context_meta: &RequestMetaObject,
    http: Option<&::http::HeaderMap>,
) -> CallToolResult {
    let mut meta = params_meta.unwrap_or_default();
    meta.extend(context_meta.clone());
    let json = serde_json::to_string(&meta).expect("a JSON object always serializes");
    let mut blocks = vec![ContentBlock::text(json)];
    // Over HTTP, the trace headers of the request too: the broker sends both.
    if let Some(headers) = http {
        let trace = crate::telemetry::context::TraceHeaders::from_headers(headers);
        let json = serde_json::json!({ "http_headers": trace.to_headers() });
        blocks.push(ContentBlock::text(json.to_string()));
    }
    CallToolResult::success(blocks)
}

/// `whoami`: the process's id, working directory and arguments, the environment variables
/// asked for, and over HTTP the request's headers: what a client's config gave this server.
pub(super) fn whoami(args: WhoamiArgs, http: Option<&::http::HeaderMap>) -> CallToolResult {
    let env: serde_json::Map<String, serde_json::Value> = args
        .env
        .into_iter()
        .map(|name| {
            let value = std::env::var(&name).ok();
            (name, serde_json::json!(value))
        })
        .collect();
    let headers: serde_json::Map<String, serde_json::Value> = http
        .into_iter()
        .flatten()
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.into())))
        .collect();
    let report = serde_json::json!({
        "pid": std::process::id(),
        "cwd": std::env::current_dir().ok(),
        "args": std::env::args().skip(1).collect::<Vec<_>>(),
        "env": env,
        "headers": headers,
    });
    text_result(report.to_string())
}

/// Synthetic and run-time tools: check the arguments against `T`, then echo them.
pub(super) fn echo_arguments<T: DeserializeOwned>(
    tool: &str,
    args: JsonObject,
) -> Result<CallToolResult, ErrorData> {
    let json = serde_json::Value::Object(args.clone());
    parse_args::<T>(tool, args)?;
    Ok(text_result(format!("{tool}: {json}")))
}

/// `ask`'s question: one required string `answer` (or why it cannot be built).
pub(super) fn question(args: AskArgs) -> Result<ElicitRequestParams, String> {
    let schema = ElicitationSchema::builder()
        .required_string("answer")
        .build()
        .map_err(|error| format!("cannot build the question: {error}"))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: args.question,
        requested_schema: schema,
    })
}

/// What `ask` says of the user's answer.
pub(super) fn answered(result: &ElicitResult) -> CallToolResult {
    match result.action {
        ElicitationAction::Accept => {
            let answer = result
                .content
                .as_ref()
                .and_then(|content| content.get("answer"))
                .and_then(|answer| answer.as_str())
                .unwrap_or_default();
            text_result(format!("the user answered: {answer}"))
        }
        ElicitationAction::Decline => text_result("the user declined to answer"),
        _ => text_result("the user cancelled"),
    }
}

/// `ask`: puts the question to the user (`elicitation/create`, one required string `answer`)
/// and says what they answered; a client that cannot ask gets a tool error.
pub(super) async fn ask(args: AskArgs, context: &RequestContext<RoleServer>) -> CallToolResult {
    let params = match question(args) {
        Ok(params) => params,
        Err(error) => return tool_error(error),
    };
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    match context.peer.send_request(request).await {
        Ok(ClientResult::ElicitResult(result)) => answered(&result),
        Ok(other) => tool_error(format!("the client answered the question with {other:?}")),
        Err(error) => tool_error(format!("cannot ask the user: {error}")),
    }
}

/// The key of `ask`'s question among a 2026-07-28 call's input requests.
const ASK_KEY: &str = "answer";

/// `ask` on 2026-07-28, where a server asks by answering `input_required` (MRTR): the call
/// comes back with the user's answer under [`ASK_KEY`]. A client that did not declare
/// elicitation for this request is not asked (a tool error says so).
pub(super) fn ask_in_rounds(
    args: AskArgs,
    responses: Option<&InputResponses>,
    context: &RequestContext<RoleServer>,
) -> CallToolResponse {
    if let Some(answer) = responses.and_then(|responses| responses.get(ASK_KEY)) {
        return match serde_json::from_value::<ElicitResult>(answer.clone()) {
            Ok(result) => answered(&result).into(),
            Err(error) => {
                tool_error(format!("the answer is not an elicitation result: {error}")).into()
            }
        };
    }
    let can_ask = context
        .meta
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.elicitation.is_some());
    if !can_ask {
        return tool_error("cannot ask the user: the client did not declare elicitation").into();
    }
    let params = match question(args) {
        Ok(params) => params,
        Err(error) => return tool_error(error).into(),
    };
    let asked = InputRequest::Elicitation(ElicitRequest::new(params));
    let requests = InputRequests::from([(ASK_KEY.to_owned(), asked)]);
    CallToolResponse::InputRequired(InputRequiredResult::new(Some(requests), None))
}

/// Default and bounds of `sleep`'s `steps`.
const DEFAULT_STEPS: u32 = 5;
const MAX_STEPS: u32 = 1000;

/// `sleep`: waits `ms` in `steps` equal parts, sends `notifications/progress` after each part when
/// the request carries a progress token, and returns at once when the request is cancelled or
/// `stop` is (the server is closing).
pub(super) async fn sleep(
    args: SleepArgs,
    context: &RequestContext<RoleServer>,
    stop: &CancellationToken,
) -> CallToolResult {
    let steps = args.steps.unwrap_or(DEFAULT_STEPS).clamp(1, MAX_STEPS);
    let token = context.meta.get_progress_token();
    tracing::info!(tool = "sleep", ms = args.ms, steps, "sleep started");
    for step in 1..=steps {
        let slept_ms = step_end_ms(args.ms, step - 1, steps);
        let wait = Duration::from_millis(step_end_ms(args.ms, step, steps) - slept_ms);
        tokio::select! {
            biased;
            () = context.ct.cancelled() => return sleep_cancelled(slept_ms, "request cancelled"),
            () = stop.cancelled() => return sleep_cancelled(slept_ms, "server closing"),
            () = tokio::time::sleep(wait) => {}
        }
        if let Some(token) = &token {
            let done = step_end_ms(args.ms, step, steps);
            let progress = ProgressNotificationParam::new(token.clone(), f64::from(step))
                .with_total(f64::from(steps))
                .with_message(format!("slept {done} of {} ms", args.ms));
            if let Err(error) = context.peer.notify_progress(progress).await {
                tracing::debug!(tool = "sleep", %error, "progress notification not sent");
            }
        }
    }
    tracing::info!(tool = "sleep", ms = args.ms, "sleep finished");
    text_result(format!("slept {} ms", args.ms))
}

fn sleep_cancelled(slept_ms: u64, reason: &str) -> CallToolResult {
    tracing::info!(tool = "sleep", slept_ms, reason, "sleep cancelled");
    tool_error(format!("sleep cancelled after {slept_ms} ms: {reason}"))
}

/// When step `step` of `steps` ends, in ms from the start; u128 so no `ms` can overflow.
pub(super) fn step_end_ms(ms: u64, step: u32, steps: u32) -> u64 {
    let end = u128::from(ms) * u128::from(step) / u128::from(steps);
    u64::try_from(end).expect("step <= steps, so end <= ms")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::demo_server::tools::{Builtin, RuntimeArgs, SyntheticArgs};

    fn args(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    fn text_of(result: &CallToolResult) -> &str {
        &result.content[0].as_text().unwrap().text
    }

    #[test]
    fn stats_output_schema_matches_its_result() {
        let tool = Builtin::Stats.definition();
        let output = tool.output_schema.expect("stats declares an output schema");
        let result = stats(parse_args("stats", args(json!({"numbers": [1, 2.5, -3]}))).unwrap());
        let structured = result.structured_content.clone().unwrap();
        assert_eq!(
            structured,
            json!({"count": 3, "sum": 0.5, "min": -3.0, "max": 2.5, "mean": 0.5 / 3.0})
        );
        assert_eq!(
            serde_json::from_str::<Value>(text_of(&result)).unwrap(),
            structured
        );
        for key in structured.as_object().unwrap().keys() {
            assert!(
                output["properties"].get(key).is_some(),
                "{key} missing from output schema"
            );
        }
    }

    #[test]
    fn tool_errors_for_bad_but_well_typed_input() {
        let cases = [
            add(AddArgs { a: i64::MAX, b: 1 }),
            stats(StatsArgs { numbers: vec![] }),
            stats(StatsArgs {
                numbers: vec![f64::MAX, f64::MAX],
            }),
            fail(FailArgs { message: None }),
        ];
        for result in cases {
            assert_eq!(result.is_error, Some(true), "{result:?}");
        }
        assert_eq!(
            text_of(&fail(FailArgs { message: None })),
            "this tool always fails"
        );
    }

    #[test]
    fn badly_typed_arguments_are_invalid_params() {
        let cases = [
            ("add", json!({"a": 1})),
            ("add", json!({"a": 1, "b": "2"})),
            ("add", json!({"a": 1, "b": 2, "c": 3})),
            ("add", json!({"a": 1.5, "b": 2})),
        ];
        for (tool, value) in cases {
            let error = parse_args::<AddArgs>(tool, args(value.clone())).unwrap_err();
            assert_eq!(
                error.code,
                rmcp::model::ErrorCode::INVALID_PARAMS,
                "{value}"
            );
            assert!(
                error
                    .message
                    .starts_with("invalid arguments for tool add: "),
                "{}",
                error.message
            );
        }
        assert_eq!(
            text_of(&add(
                parse_args("add", args(json!({"a": -2, "b": 5}))).unwrap()
            )),
            "3"
        );
    }

    #[test]
    fn echo_meta_keeps_unknown_keys() {
        let mut meta = RequestMetaObject::new();
        meta.0
            .0
            .insert("traceparent".into(), json!("00-abc-def-01"));
        meta.0
            .0
            .insert("x-custom".into(), json!({"nested": [1, 2]}));
        let result = echo_meta(None, &meta, None);
        let echoed: Value = serde_json::from_str(text_of(&result)).unwrap();
        assert_eq!(
            echoed,
            json!({"traceparent": "00-abc-def-01", "x-custom": {"nested": [1, 2]}})
        );
    }

    #[test]
    fn echo_arguments_checks_then_echoes() {
        let result = echo_arguments::<RuntimeArgs>("a/b", args(json!({"text": "hi"}))).unwrap();
        assert_eq!(text_of(&result), r#"a/b: {"text":"hi"}"#);
        assert!(echo_arguments::<RuntimeArgs>("a/b", args(json!({"text": 1}))).is_err());
        assert!(
            echo_arguments::<SyntheticArgs>("s", args(json!({"query": "q", "mode": "slow"})))
                .is_err()
        );
        assert!(
            echo_arguments::<SyntheticArgs>(
                "s",
                args(json!({"query": "q", "filter": {"field": "f"}}))
            )
            .is_ok()
        );
    }

    #[test]
    fn sleep_steps_add_up_to_the_whole_time() {
        for (ms, steps) in [(0, 5), (1, 5), (1000, 3), (u64::MAX, 7), (10, 1)] {
            let ends: Vec<u64> = (0..=steps).map(|s| step_end_ms(ms, s, steps)).collect();
            assert_eq!((ends[0], ends[steps as usize]), (0, ms));
            assert!(ends.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}
