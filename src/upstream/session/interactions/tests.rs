#![expect(
    deprecated,
    reason = "sampling is what servers before MCP 2026-07-28 use"
)]

use std::time::Duration;

use rmcp::model::{
    CreateMessageRequestParams, ElicitationSchema, NumberOrString, ProgressToken, SamplingMessage,
};

use tokio::{sync::mpsc, time::Instant};

use crate::conversation::Interaction;

use super::*;
use crate::domain::call::Timing;

fn id(n: i64) -> RequestId {
    NumberOrString::Number(n)
}

fn token(n: i64) -> ProgressToken {
    ProgressToken(NumberOrString::Number(n))
}

fn ask() -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: "which repository?".into(),
        requested_schema: ElicitationSchema::builder()
            .required_string("answer")
            .build()
            .unwrap(),
    }
}

fn progress(token: ProgressToken, progress: f64) -> ProgressNotificationParam {
    ProgressNotificationParam::new(token, progress)
}

/// Answers the first elicitation the conversation sees with `accept`.
fn answer_with_accept(mut events: mpsc::Receiver<Interaction>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if let Interaction::Elicit { answer, .. } = event {
                let _ = answer.send(ElicitResult::new(ElicitationAction::Accept));
            }
        }
    })
}

#[tokio::test]
async fn the_only_call_on_a_shared_session_gets_its_servers_requests() {
    let interactions = Interactions::new(false);
    let (conversation, events) = Conversation::new();
    let call = interactions.begin(Some(conversation), None);
    call.sent(&id(1), &token(1));
    let _answering = answer_with_accept(events);
    interactions.arrived(&id(100));
    let result = interactions.elicit(&id(100), ask()).await;
    assert_eq!(result.action, ElicitationAction::Accept);
}

#[tokio::test]
async fn a_shared_session_with_another_call_in_flight_declines_at_once() {
    let interactions = Interactions::new(false);
    let (conversation, events) = Conversation::new();
    let streaming = interactions.begin(Some(conversation), None);
    streaming.sent(&id(1), &token(1));
    // Another caller's unary call: the request may be its call's.
    let _unary = interactions.begin(None, None);
    let _answering = answer_with_accept(events);
    interactions.arrived(&id(100));
    interactions.arrived(&id(101));
    let result = tokio::time::timeout(Duration::from_secs(1), interactions.elicit(&id(100), ask()))
        .await
        .expect("declined at once, not left waiting");
    assert_eq!(result.action, ElicitationAction::Decline);
    let sampled = interactions
        .sample(
            &id(101),
            CreateMessageRequestParams::new(vec![SamplingMessage::user_text("hi")], 10),
        )
        .await;
    assert!(sampled.is_err(), "sampling is refused the same way");
}

/// A log message, as the transport reads it.
fn log(text: &str) -> LoggingMessageNotificationParam {
    LoggingMessageNotificationParam::new(
        rmcp::model::LoggingLevel::Info,
        serde_json::Value::from(text),
    )
}

/// The log messages the conversation received so far.
fn logs(events: &mut mpsc::Receiver<Interaction>) -> Vec<String> {
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let Interaction::Log(log) = event {
            seen.push(log.data.to_string());
        }
    }
    seen
}

#[tokio::test]
async fn what_is_read_during_another_callers_request_stays_untied_after_it_ends() {
    let interactions = Interactions::new(false);
    let (conversation, mut events) = Conversation::new();
    let alice = interactions.begin(Some(conversation), None);
    alice.sent(&id(1), &token(1));
    // Bob's prompts/get: the server asks and logs during it.
    let mut bob = interactions.begin(None, None);
    interactions.arrived(&id(100));
    interactions.log(log("bob's"));
    bob.answered();
    drop(bob);
    // Its handler runs only now, when Alice's call is alone again: still not hers.
    let result = interactions.elicit(&id(100), ask()).await;
    assert_eq!(result.action, ElicitationAction::Decline);
    interactions.log(log("alice's"));
    assert_eq!(logs(&mut events), [r#""alice's""#], "nothing of bob's");
}

/// A caller by id.
fn key(id: &str) -> CallerKey {
    let mut key = CallerKey::anonymous();
    key.id = id.into();
    key
}

#[tokio::test]
async fn another_callers_request_given_up_on_keeps_the_shared_session_untied_for_a_while() {
    let interactions = Interactions::new(false);
    let (alice, bob) = (key("alice"), key("bob"));
    let (conversation, mut events) = Conversation::new();
    // Alice's call timed out: the server may still ask or log for it.
    drop(interactions.begin(None, Some(&alice)));
    let call = interactions.begin(Some(conversation), Some(&bob));
    call.sent(&id(2), &token(2));
    interactions.arrived(&id(100));
    interactions.log(log("late"));
    let result = interactions.elicit(&id(100), ask()).await;
    assert_eq!(result.action, ElicitationAction::Decline);
    assert!(logs(&mut events).is_empty());
    drop(call);

    // Bob's own request given up on keeps nothing from him.
    let (conversation, events) = Conversation::new();
    let interactions = Interactions::new(false);
    drop(interactions.begin(None, Some(&bob)));
    let call = interactions.begin(Some(conversation), Some(&bob));
    call.sent(&id(3), &token(3));
    let _answering = answer_with_accept(events);
    interactions.arrived(&id(101));
    let result = interactions.elicit(&id(101), ask()).await;
    assert_eq!(result.action, ElicitationAction::Accept);
}

#[tokio::test]
async fn a_unary_call_alone_gets_no_requests() {
    let interactions = Interactions::new(true);
    let _unary = interactions.begin(None, None);
    let result = interactions.elicit(&id(100), ask()).await;
    assert_eq!(result.action, ElicitationAction::Decline);
}

#[tokio::test]
async fn a_request_tied_to_its_answer_stream_reaches_that_call_only() {
    let interactions = Interactions::new(false);
    let (first, first_events) = Conversation::new();
    let (second, mut second_events) = Conversation::new();
    let a = interactions.begin(Some(first), None);
    a.sent(&id(1), &token(1));
    let b = interactions.begin(Some(second), None);
    b.sent(&id(2), &token(2));
    let _answering = answer_with_accept(first_events);
    interactions.relate(id(100), id(1));
    let result = interactions.elicit(&id(100), ask()).await;
    assert_eq!(result.action, ElicitationAction::Accept);
    assert!(
        second_events.try_recv().is_err(),
        "the other call saw nothing"
    );
    // Tied to a unary call: declined.
    let _unary = interactions.begin(None, None);
    interactions.relate(id(101), id(3));
    let declined = interactions.elicit(&id(101), ask()).await;
    assert_eq!(declined.action, ElicitationAction::Decline);
}

#[tokio::test]
async fn a_closed_conversation_declines_and_a_finished_call_cancels() {
    let interactions = Interactions::new(true);
    let (conversation, _events) = Conversation::new();
    let call = interactions.begin(Some(conversation.clone()), None);
    call.sent(&id(1), &token(1));
    conversation.close();
    assert_eq!(
        interactions.elicit(&id(100), ask()).await.action,
        ElicitationAction::Decline
    );
    // Open again (a new conversation) but the call ends before an answer.
    let (conversation, mut events) = Conversation::new();
    let call = interactions.begin(Some(conversation), None);
    call.sent(&id(2), &token(2));
    let asking = tokio::spawn({
        let interactions = interactions.clone();
        async move { interactions.elicit(&id(101), ask()).await }
    });
    let Some(Interaction::Elicit { answer, .. }) = events.recv().await else {
        panic!("the elicitation reaches the call");
    };
    drop(answer);
    assert_eq!(asking.await.unwrap().action, ElicitationAction::Cancel);
}

#[tokio::test]
async fn progress_reaches_its_call_in_order_even_before_its_token_is_known() {
    let interactions = Interactions::new(false);
    let (conversation, mut events) = Conversation::new();
    let call = interactions.begin(Some(conversation), None);
    // The answer raced the registration: kept until the token is known.
    interactions.progress(progress(token(7), 1.0));
    call.sent(&id(7), &token(7));
    interactions.progress(progress(token(7), 2.0));
    interactions.progress(progress(token(8), 9.0));
    let mut seen = Vec::new();
    while let Ok(Interaction::Progress(p)) = events.try_recv() {
        seen.push(p.progress);
    }
    assert_eq!(seen, [1.0, 2.0], "in order, and nothing of another call");
}

#[tokio::test(start_paused = true)]
async fn progress_restarts_the_timeout_up_to_the_max() {
    let (conversation, _events) = Conversation::new();
    let pulse = conversation.pulse_handle();
    let timing = Timing {
        timeout: Duration::from_secs(1),
        max: Duration::from_secs(3),
    };
    let beats = tokio::spawn({
        let conversation = conversation.clone();
        async move {
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(400)).await;
                conversation.pulse().signal();
            }
        }
    });
    let answer = tokio::time::sleep(Duration::from_millis(2500));
    assert!(
        pulse.within(timing, answer).await.is_some(),
        "kept alive by progress"
    );
    let never = std::future::pending::<()>();
    let started = Instant::now();
    assert!(pulse.within(timing, never).await.is_none());
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "stopped at the max"
    );
    beats.abort();
    let silent = Conversation::new().0;
    let started = Instant::now();
    assert!(
        silent
            .pulse()
            .within(timing, std::future::pending::<()>())
            .await
            .is_none()
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(1),
        "no progress: the timeout"
    );
}
