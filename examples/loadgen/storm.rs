//! The cancellation storm, after the soak: CallTool `echo` at concurrency 32 with random
//! deadlines (a fifth of the calls give up within 20 ms, two fifths within 0.4 s, half of
//! those by resetting their stream instead), large messages among small ones, while the demo
//! server stops reading its stdin now and then (SIGSTOP, SIGCONT) and is SIGKILLed now and
//! then (in the first half only: a kill fails the calls in flight, which would hide a call
//! hung by a lost line). A call that gives up affects only itself (issue 36): every patient call (10 s) is
//! answered with its own message, or fails at once with its server, and none hangs; no answer
//! is another call's. A broker that left a partial line in the pipe, or lost the lines queued
//! behind one, would leave patient calls waiting for answers that never come.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::bail;
use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use tokio::task::JoinSet;
use tonic::{Code, transport::Channel};
use toolbroker::proto::{CallToolRequest, tool_broker_client::ToolBrokerClient};

use crate::{
    Plan,
    broker::BrokerProcess,
    soak::{self, CONCURRENCY, HUNG_AFTER as PATIENT, Tally, children},
};

/// How long past its own deadline a call may take to end before it counts as hung.
const GRACE: Duration = Duration::from_secs(2);

/// One call: its message and how its caller waits.
struct Call {
    message: String,
    patience: Duration,
    /// Gives up by resetting its stream rather than by a deadline the broker knows.
    resets: bool,
}

impl Call {
    /// A random call: mostly small messages, some of 50 to 250 KB (larger than the pipe).
    fn random(rng: &mut fastrand::Rng, n: u64) -> Self {
        let pad = if rng.u8(0..10) < 4 {
            rng.usize(50_000..250_000)
        } else {
            rng.usize(0..200)
        };
        let message = format!("storm-{n}-{}", "s".repeat(pad));
        let patience = match rng.u8(0..5) {
            0 => Duration::from_millis(rng.u64(1..20)),
            1 | 2 => Duration::from_millis(rng.u64(50..400)),
            _ => PATIENT,
        };
        Self {
            message,
            patience,
            resets: rng.bool(),
        }
    }

    /// Makes the call and counts what became of it.
    async fn run(self, client: &mut ToolBrokerClient<Channel>, tally: &Tally) {
        let mut request = tonic::Request::new(CallToolRequest {
            name: "echo".into(),
            arguments_json: serde_json::json!({ "message": self.message }).to_string(),
            ..Default::default()
        });
        let patient = self.patience == PATIENT;
        let resets = self.resets && !patient;
        if !resets {
            request.set_timeout(self.patience);
        }
        let started = Instant::now();
        let wait = if resets {
            self.patience
        } else {
            self.patience + GRACE
        };
        let answer = tokio::time::timeout(wait, client.call_tool(request)).await;
        let counter = match answer {
            Ok(Ok(reply)) if reply.get_ref().text == self.message => &tally.right,
            Ok(Ok(_)) => &tally.wrong,
            Err(_) if resets => &tally.gave_up,
            Err(_) => &tally.hung,
            Ok(Err(_)) if patient && started.elapsed() >= PATIENT => &tally.hung,
            Ok(Err(status)) if !patient && gave_up(status.code()) => &tally.gave_up,
            Ok(Err(_)) => &tally.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if std::ptr::eq(counter, &tally.failed) {
            // While the server restarts every call fails at once: no busy loop.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A deadline's status: the broker's DEADLINE_EXCEEDED or tonic's CANCELLED.
fn gave_up(code: Code) -> bool {
    matches!(code, Code::DeadlineExceeded | Code::Cancelled)
}

/// Runs the storm and fails if any answer was wrong or any call hung.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let seconds = if plan.quick { 4 } else { 20 };
    println!(
        "\n## Cancellation storm: CallTool echo c={CONCURRENCY} for {seconds} s, random deadlines and resets, the demo server stalled (SIGSTOP) and SIGKILLed now and then"
    );
    let (broker, client) = soak::start().await?;
    let tally = Arc::new(Tally::default());
    let next = Arc::new(AtomicU64::new(0));
    let stop_at = Instant::now() + Duration::from_secs(seconds);
    let mut callers = JoinSet::new();
    for caller in 0..CONCURRENCY {
        let (mut client, tally, next) = (client.clone(), tally.clone(), next.clone());
        callers.spawn(async move {
            let mut rng = fastrand::Rng::with_seed(caller as u64);
            while Instant::now() < stop_at {
                let call = Call::random(&mut rng, next.fetch_add(1, Ordering::Relaxed));
                call.run(&mut client, &tally).await;
            }
        });
    }
    let (stalls, kills) = disturb(&broker, stop_at).await?;
    callers.join_all().await;
    let after = final_call(&mut client.clone()).await;
    let c = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let (right, wrong, gave_up, failed, hung) = (
        c(&tally.right),
        c(&tally.wrong),
        c(&tally.gave_up),
        c(&tally.failed),
        c(&tally.hung),
    );
    println!(
        "{stalls} stalls, {kills} kills: {right} right answers, {gave_up} calls given up, \
         {failed} failed (in flight at a kill, or while the server restarted), {wrong} wrong \
         answers, {hung} hung calls; afterwards: {after}"
    );
    if wrong > 0 || hung > 0 || right == 0 || gave_up == 0 || stalls == 0 || kills == 0 {
        bail!(
            "the storm failed: {wrong} wrong answers, {hung} hung calls, {right} right, \
             {gave_up} given up, {stalls} stalls, {kills} kills"
        );
    }
    if after != "answered" {
        bail!("after the storm the broker did not answer: {after}");
    }
    Ok(())
}

/// Until `stop_at`, after a short pause each time: stalls the server (SIGSTOP for 0.15 to 0.6 s,
/// then SIGCONT), or in the first half one time in three kills it. Returns how many stalls and
/// kills.
async fn disturb(broker: &BrokerProcess, stop_at: Instant) -> anyhow::Result<(u64, u64)> {
    let mut rng = fastrand::Rng::with_seed(36);
    let (mut stalls, mut kills) = (0, 0);
    let halfway = Instant::now() + (stop_at - Instant::now()) / 2;
    for turn in 0.. {
        let pause = Duration::from_millis(rng.u64(50..200));
        let stall = Duration::from_millis(rng.u64(150..600));
        if Instant::now() + pause + stall >= stop_at {
            break;
        }
        tokio::time::sleep(pause).await;
        let servers = children(broker.pid())?;
        if turn % 3 == 1 && Instant::now() < halfway {
            signal_all(&servers, Signal::SIGKILL);
            kills += servers.len() as u64;
            continue;
        }
        signal_all(&servers, Signal::SIGSTOP);
        tokio::time::sleep(stall).await;
        signal_all(&servers, Signal::SIGCONT);
        stalls += servers.len() as u64;
    }
    Ok((stalls, kills))
}

fn signal_all(pids: &[u32], signal: Signal) {
    for &pid in pids {
        // Gone already (a kill before, a restart): nothing to do.
        let _ = kill(Pid::from_raw(pid as i32), signal);
    }
}

/// One patient call after the storm, once the server is back: "answered" or what went wrong.
async fn final_call(client: &mut ToolBrokerClient<Channel>) -> String {
    let deadline = Instant::now() + PATIENT;
    while Instant::now() < deadline {
        let request = CallToolRequest {
            name: "echo".into(),
            arguments_json: r#"{"message": "after"}"#.into(),
            ..Default::default()
        };
        match tokio::time::timeout(PATIENT, client.call_tool(request)).await {
            Ok(Ok(reply)) if reply.get_ref().text == "after" => return "answered".into(),
            Ok(Ok(reply)) => return format!("a wrong answer: {:?}", reply.get_ref().text),
            Ok(Err(status)) if status.code() == Code::Unavailable => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Err(status)) => return format!("failed: {status}"),
            Err(_) => return "hung".into(),
        }
    }
    "still unavailable".into()
}
