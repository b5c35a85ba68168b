//! `demo-server --tasks`: `sleep` and `ask` answered as tasks (the Tasks extension of MCP
//! 2026-07-28, with rmcp's own `TaskManager`) to a client that declares the extension, so that
//! the broker can be tried against a server that makes tasks.

use std::time::Duration;

use rmcp::{
    ErrorData, RoleServer,
    model::{CallToolResponse, CreateTaskResult, ElicitRequest, ElicitResult, InputRequest},
    service::RequestContext,
    task_manager::{TaskExit, TaskManager, TaskOptions},
};
use tokio_util::sync::CancellationToken;

use super::{
    handlers::{answered, question, step_end_ms, text_result, tool_error},
    tools::{AskArgs, SleepArgs},
};

/// How often a client is asked to poll: short, for tests.
const POLL_INTERVAL_MS: u64 = 100;
/// Steps of a `sleep` task when the call names none.
const DEFAULT_STEPS: u32 = 5;

/// Whether `context`'s client takes tasks: 2026-07-28, declaring the extension.
pub(super) fn taken(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| !version.has_initialize())
        && context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks())
}

fn options() -> TaskOptions {
    TaskOptions::new().with_poll_interval_ms(POLL_INTERVAL_MS)
}

/// `sleep` as a task: each step says how far it got in the status message; `tasks/cancel` (or
/// the server closing) ends it cancelled.
pub(super) fn sleep(
    manager: &TaskManager,
    args: SleepArgs,
    stop: CancellationToken,
) -> CallToolResponse {
    let steps = args.steps.unwrap_or(DEFAULT_STEPS).clamp(1, 1000);
    let task = manager.spawn(options(), move |context| {
        Box::pin(async move {
            tracing::info!(tool = "sleep", ms = args.ms, steps, "sleep task started");
            for step in 1..=steps {
                let slept = step_end_ms(args.ms, step - 1, steps);
                let wait = Duration::from_millis(step_end_ms(args.ms, step, steps) - slept);
                tokio::select! {
                    biased;
                    () = context.cancelled() => {
                        tracing::info!(tool = "sleep", slept_ms = slept, "sleep task cancelled");
                        return Err(TaskExit::Cancelled);
                    }
                    () = stop.cancelled() => return Err(TaskExit::Cancelled),
                    () = tokio::time::sleep(wait) => {}
                }
                let done = step_end_ms(args.ms, step, steps);
                context.set_status_message(format!("slept {done} of {} ms", args.ms));
            }
            tracing::info!(tool = "sleep", ms = args.ms, "sleep task finished");
            Ok(text_result(format!("slept {} ms", args.ms)))
        })
    });
    CallToolResponse::Task(CreateTaskResult::new(task))
}

/// `ask` as a task: the question waits in the task's `inputRequests` for `tasks/update`.
pub(super) fn ask(manager: &TaskManager, args: AskArgs) -> Result<CallToolResponse, ErrorData> {
    let params = question(args).map_err(|error| ErrorData::internal_error(error, None))?;
    let task = manager.spawn(options(), move |context| {
        Box::pin(async move {
            let asked = InputRequest::Elicitation(ElicitRequest::new(params));
            let answer = context.request_input("answer", asked).await?;
            Ok(match serde_json::from_value::<ElicitResult>(answer) {
                Ok(result) => answered(&result),
                Err(error) => {
                    tool_error(format!("the answer is not an elicitation result: {error}"))
                }
            })
        })
    });
    Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
}
