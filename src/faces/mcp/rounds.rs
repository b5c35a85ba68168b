//! A call's questions to a 2026-07-28 client, as MCP's Multi Round-Trip Requests, for both
//! MCP faces: that version has no requests from server to client, so when the upstream server
//! asks the user (elicitation) or the caller's model (sampling) during a call, the face answers the
//! `tools/call` with `resultType: "input_required"` (the question, and a `requestState`), keeps
//! the call running, parked, and resumes it when the client sends the same `tools/call` again
//! with its `inputResponses` and that `requestState`.
//!
//! The `requestState` is the face's: an HMAC (rmcp's `RequestStateCodec`, a key drawn at
//! start) over a ticket naming the parked call, bound to the caller and the call (tool and
//! arguments) and valid for [`QUESTION_TIMEOUT`]. A client cannot forge one, another caller
//! cannot use one, and one is good once: the ticket is taken when the call resumes. A parked
//! call nobody resumes is forgotten after that time; its question is then declined, as
//! before. A caller parks at most [`PARKED_PER_CALLER`] calls at a time; beyond that a
//! question is declined.

// Sampling is deprecated by MCP 2026-07-28 (SEP-2577) but is what servers use today.
#![expect(
    deprecated,
    reason = "sampling is what servers before MCP 2026-07-28 use"
)]

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientResult,
        CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest,
        InputRequiredResult, InputResponses, RequestStateCodec, SealOptions, ServerNotification,
        ServerRequest,
    },
    service::RequestContext,
};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use crate::conversation::Answers;
use crate::core::unguessable::unguessable;
use crate::domain::caller::CallerKey;

/// How long a question may wait for its answer (the call's own timeout is paused meanwhile).
pub const QUESTION_TIMEOUT: Duration = Duration::from_secs(600);

/// How many calls one caller may have waiting on its answers.
pub const PARKED_PER_CALLER: usize = 16;

/// The key of the one input request of a round.
const INPUT_KEY: &str = "question";

/// What a running call says next: a question for the client, or its answer.
pub enum Turn {
    /// A question, and where its answer goes.
    Ask(ServerRequest, oneshot::Sender<ClientResult>),
    /// Something for the client during the call (progress), on the request it waits on.
    Notify(ServerNotification),
    /// The call's answer.
    Done(Result<CallToolResponse, rmcp::ErrorData>),
}

/// A running call, driven by a task of its own: ended when this is dropped.
pub struct Running {
    /// What the call says next.
    pub turns: mpsc::Receiver<Turn>,
    /// The task running it.
    task: tokio::task::AbortHandle,
}

impl Running {
    /// The call run by `task`, saying what it does next on `turns`.
    pub fn new(turns: mpsc::Receiver<Turn>, task: tokio::task::AbortHandle) -> Self {
        Self { turns, task }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Nobody will hear the call's answer: it ends here (cancelled upstream).
        self.task.abort();
    }
}

/// A question waiting for its answer, and where the answer goes (dropped unanswered: the
/// call takes it as declined).
pub struct Question {
    /// What is asked.
    pub request: Box<ServerRequest>,
    /// Where the answer goes.
    pub answer: oneshot::Sender<ClientResult>,
}

/// A call waiting for its client's answer.
pub struct Parked {
    /// Who may resume it.
    owner: CallerKey,
    /// The call.
    running: Running,
    /// The question asked, and where its answer goes.
    question: Question,
    /// When it is forgotten.
    expires: Instant,
}

/// The face's parked calls and the key of their states.
pub struct Rounds {
    codec: RequestStateCodec,
    parked: Mutex<HashMap<String, Parked>>,
}

impl Default for Rounds {
    fn default() -> Self {
        let mut key = [0u8; 32];
        // The OS source fails only where nothing can run (no /dev/urandom, no getrandom(2)).
        getrandom::fill(&mut key).expect("the operating system's random source");
        let codec = RequestStateCodec::try_new(key.to_vec()).expect("a 32-byte key is long enough");
        Self {
            codec,
            parked: Mutex::default(),
        }
    }
}

/// Why a `requestState` was not taken (one answer for every reason, as the spec asks).
#[derive(Debug, PartialEq, Eq)]
pub struct NotValid;

impl Rounds {
    /// Parks `running`, which asked `question`: the result that tells the client; or, when
    /// the question has no input request of MCP's or `owner` has too many parked already,
    /// both back (the question is then the caller's to decline).
    pub fn park(
        &self,
        owner: &CallerKey,
        binding: &[u8],
        running: Running,
        question: Question,
    ) -> Result<InputRequiredResult, (Running, Question)> {
        let Some(input) = input_request(&question.request) else {
            return Err((running, question));
        };
        let now = Instant::now();
        let mut parked = self.parked.lock().unwrap_or_else(PoisonError::into_inner);
        parked.retain(|_, call| call.expires > now);
        if parked.values().filter(|call| &call.owner == owner).count() >= PARKED_PER_CALLER {
            return Err((running, question));
        }
        let ticket = unguessable();
        let options = SealOptions::new()
            .associated_data(binding)
            .ttl(QUESTION_TIMEOUT);
        let state = self.codec.seal_with(ticket.as_bytes(), &options);
        let call = Parked {
            owner: owner.clone(),
            running,
            question,
            expires: now + QUESTION_TIMEOUT,
        };
        parked.insert(ticket, call);
        let requests = [(INPUT_KEY.to_owned(), input)].into_iter().collect();
        Ok(InputRequiredResult::new(Some(requests), Some(state)))
    }

    /// Takes the call `state` parked, if it is this face's, for this caller and call
    /// (`binding`), not expired and not taken before.
    pub fn resume(
        &self,
        state: &str,
        owner: &CallerKey,
        binding: &[u8],
    ) -> Result<Parked, NotValid> {
        let ticket = self.codec.open_with(state, binding).map_err(|_| NotValid)?;
        let ticket = String::from_utf8(ticket).map_err(|_| NotValid)?;
        let mut parked = self.parked.lock().unwrap_or_else(PoisonError::into_inner);
        let call = parked.remove(&ticket).ok_or(NotValid)?;
        if &call.owner != owner || call.expires <= Instant::now() {
            return Err(NotValid);
        }
        Ok(call)
    }
}

impl Parked {
    /// Hands the client's answer in `responses` to the waiting call; without one, the call
    /// and its question back, to ask again.
    pub fn answer(
        self,
        responses: Option<&InputResponses>,
    ) -> Result<Running, (Running, Question)> {
        let Parked {
            running, question, ..
        } = self;
        match responses.and_then(|responses| responses.get(INPUT_KEY)) {
            Some(response) => {
                let answer = client_result(&question.request, response);
                let _ = question.answer.send(answer);
                Ok(running)
            }
            None => Err((running, question)),
        }
    }
}

/// `question` as an input request of MCP's; `None` for a kind it has none of.
fn input_request(question: &ServerRequest) -> Option<InputRequest> {
    match question {
        ServerRequest::ElicitRequest(request) => Some(InputRequest::Elicitation(request.clone())),
        ServerRequest::CreateMessageRequest(request) => {
            Some(InputRequest::CreateMessage(request.clone()))
        }
        _ => None,
    }
}

/// What kinds of question a client that declared `capabilities` can answer.
pub fn answers(capabilities: Option<&ClientCapabilities>) -> Answers {
    Answers {
        elicit: capabilities.is_some_and(|c| c.elicitation.is_some()),
        sample: capabilities.is_some_and(|c| c.sampling.is_some()),
    }
}

/// Whether a client with `capabilities` can answer `question`: the spec forbids asking for
/// what the client did not declare. Elicitation must be in a mode it takes (form when it
/// named none, as MCP 2025-06-18 clients do).
pub fn can_answer(capabilities: Option<&ClientCapabilities>, question: &ServerRequest) -> bool {
    match question {
        ServerRequest::ElicitRequest(request) => {
            let Some(elicitation) = capabilities.and_then(|c| c.elicitation.as_ref()) else {
                return false;
            };
            match request.params {
                ElicitRequestParams::UrlElicitationParams { .. } => elicitation.url.is_some(),
                _ => elicitation.form.is_some() || elicitation.url.is_none(),
            }
        }
        ServerRequest::CreateMessageRequest(_) => answers(capabilities).sample,
        _ => false,
    }
}

/// The client's `response` to `question` as the call takes it: an answer it cannot read is
/// a decline (elicitation) or an error result (sampling, which the call reports).
fn client_result(question: &ServerRequest, response: &Value) -> ClientResult {
    match question {
        ServerRequest::CreateMessageRequest(_) => {
            match serde_json::from_value::<CreateMessageResult>(response.clone()) {
                Ok(result) => ClientResult::CreateMessageResult(Box::new(result)),
                Err(_) => ClientResult::empty(()),
            }
        }
        _ => ClientResult::ElicitResult(
            serde_json::from_value::<ElicitResult>(response.clone())
                .unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Decline)),
        ),
    }
}

/// What a `requestState` is bound to: the caller, the tool and its arguments.
pub fn binding(owner: &CallerKey, tool: &str, arguments: Option<&Map<String, Value>>) -> Vec<u8> {
    let arguments = arguments.map(|arguments| Value::Object(arguments.clone()));
    // `kind:id` names one caller (a kind has no colon).
    serde_json::to_vec(&(owner.to_string(), tool, arguments))
        .expect("strings and JSON values serialize")
}

/// What a 2026-07-28 client is told of a `requestState` the face cannot take (one message
/// for every reason: forged, another caller's or call's, expired, used).
const STATE_NOT_VALID: &str = "requestState is not one this MCP face gave for this caller and \
     call, or it has expired or was used already: call the tool again without it";

/// One `tools/call` of `owner`, a 2026-07-28 client, with its questions asked in rounds: a
/// first request starts the call (`start`, which runs it in a task of its own, saying what it
/// does on its turns); one with a `requestState` resumes the call it names with the client's
/// answer.
pub async fn call_in_rounds(
    rounds: &Rounds,
    owner: &CallerKey,
    mut request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    start: impl FnOnce(CallToolRequestParams) -> Running,
) -> Result<CallToolResponse, ErrorData> {
    let binding = binding(owner, &request.name, request.arguments.as_ref());
    let (running, pending) = match request.request_state.take() {
        Some(state) => {
            let parked = rounds
                .resume(&state, owner, &binding)
                .map_err(|_| ErrorData::invalid_params(STATE_NOT_VALID, None))?;
            match parked.answer(request.input_responses.as_ref()) {
                Ok(running) => (running, None),
                // No answer to the question: asked again, as the spec advises.
                Err((running, question)) => (running, Some(question)),
            }
        }
        None => {
            request.input_responses = None;
            (start(request), None)
        }
    };
    let round = Round {
        owner,
        binding: &binding,
        capabilities: context.client_capabilities(),
    };
    follow(rounds, running, pending, &round, context).await
}

/// Who asks in a round, the call it is bound to, and what the client can answer.
struct Round<'a> {
    owner: &'a CallerKey,
    binding: &'a [u8],
    capabilities: Option<ClientCapabilities>,
}

/// Follows `running` until it answers or asks (then parked, and the question is the answer),
/// asking `pending` first; a question the client cannot answer is declined.
async fn follow(
    rounds: &Rounds,
    mut running: Running,
    mut pending: Option<Question>,
    round: &Round<'_>,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    loop {
        let question = match pending.take() {
            Some(question) => question,
            None => {
                let turn = tokio::select! {
                    turn = running.turns.recv() => turn,
                    // The client left: dropping `running` ends the call (cancelled upstream).
                    () = context.ct.cancelled() => {
                        return Err(ErrorData::internal_error("cancelled by the client", None));
                    }
                };
                match turn {
                    Some(Turn::Done(answer)) => return answer,
                    Some(Turn::Notify(notification)) => {
                        let _ = context.peer.send_notification(notification).await;
                        continue;
                    }
                    Some(Turn::Ask(request, answer)) => Question {
                        request: Box::new(request),
                        answer,
                    },
                    None => {
                        return Err(ErrorData::internal_error(
                            "the call ended without an answer",
                            None,
                        ));
                    }
                }
            }
        };
        if !can_answer(round.capabilities.as_ref(), &question.request) {
            // Unanswered: the call takes it as declined.
            continue;
        }
        match rounds.park(round.owner, round.binding, running, question) {
            Ok(asked) => return Ok(CallToolResponse::InputRequired(asked)),
            // Too many of the caller's calls wait already: this question is declined.
            Err((back, _declined)) => running = back,
        }
    }
}

/// Asks `request` of the client of a call run in rounds, on its `turns`; `None` when the
/// client is gone or does not answer within [`QUESTION_TIMEOUT`].
pub async fn ask(turns: &mpsc::Sender<Turn>, request: ServerRequest) -> Option<ClientResult> {
    let (answer, answered) = oneshot::channel();
    turns.send(Turn::Ask(request, answer)).await.ok()?;
    tokio::time::timeout(QUESTION_TIMEOUT, answered)
        .await
        .ok()?
        .ok()
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ElicitRequest, ElicitRequestParams};
    use serde_json::json;

    use super::*;

    fn caller(id: &str) -> CallerKey {
        CallerKey::token(id)
    }

    fn question() -> (Question, oneshot::Receiver<ClientResult>) {
        let params: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form", "message": "Colour?",
            "requestedSchema": {"type": "object", "properties": {}},
        }))
        .unwrap();
        let (answer, answered) = oneshot::channel();
        let request = Box::new(ServerRequest::ElicitRequest(ElicitRequest::new(params)));
        (Question { request, answer }, answered)
    }

    fn running() -> Running {
        let (_, turns) = mpsc::channel(1);
        Running::new(
            turns,
            tokio::spawn(std::future::pending::<()>()).abort_handle(),
        )
    }

    #[tokio::test]
    async fn a_state_resumes_its_call_once_for_its_caller_and_call() {
        let rounds = Rounds::default();
        let (alice, bob) = (caller("alice"), caller("bob"));
        let bound = binding(&alice, "ask", None);
        let (asked, answered) = question();
        let result = rounds.park(&alice, &bound, running(), asked).ok().unwrap();
        let state = result.request_state.unwrap();
        let other_call = binding(&alice, "ask", Some(&Map::new()));
        assert_eq!(
            rounds
                .resume(&state, &bob, &binding(&bob, "ask", None))
                .err(),
            Some(NotValid)
        );
        assert_eq!(
            rounds.resume(&state, &alice, &other_call).err(),
            Some(NotValid)
        );
        assert_eq!(
            rounds.resume("rs1.forged", &alice, &bound).err(),
            Some(NotValid)
        );
        let parked = rounds.resume(&state, &alice, &bound).ok().unwrap();
        assert_eq!(
            rounds.resume(&state, &alice, &bound).err(),
            Some(NotValid),
            "used"
        );
        let responses = [(
            "question".to_owned(),
            json!({"action": "accept", "content": {"a": 1}}),
        )];
        assert!(
            parked
                .answer(Some(&responses.into_iter().collect()))
                .is_ok()
        );
        match answered.await.unwrap() {
            ClientResult::ElicitResult(result) => {
                assert_eq!(result.action, ElicitationAction::Accept)
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_caller_parks_a_bounded_number_of_calls() {
        let rounds = Rounds::default();
        let alice = caller("alice");
        for _ in 0..PARKED_PER_CALLER {
            let (asked, _) = question();
            assert!(rounds.park(&alice, b"x", running(), asked).is_ok());
        }
        let (asked, _) = question();
        assert!(rounds.park(&alice, b"x", running(), asked).is_err());
        let (asked, _) = question();
        assert!(
            rounds.park(&caller("bob"), b"x", running(), asked).is_ok(),
            "another caller's own"
        );
    }

    #[test]
    fn a_question_is_asked_only_of_a_client_that_declared_it_can_answer() {
        let (asked, _) = question();
        let none = ClientCapabilities::default();
        let eliciting: ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {}})).unwrap();
        assert!(!can_answer(None, &asked.request));
        assert!(!can_answer(Some(&none), &asked.request));
        assert!(can_answer(Some(&eliciting), &asked.request));
        assert_eq!(
            answers(Some(&eliciting)),
            Answers {
                elicit: true,
                sample: false
            }
        );
    }

    #[test]
    fn an_elicitation_is_asked_only_in_a_mode_the_client_takes() {
        let url: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "url", "message": "Sign in", "url": "https://example.com/",
            "elicitationId": "e1",
        }))
        .unwrap();
        let url = ServerRequest::ElicitRequest(ElicitRequest::new(url));
        let (form, _) = question();
        let declared = |value| serde_json::from_value::<ClientCapabilities>(value).unwrap();
        let form_only = declared(json!({"elicitation": {"form": {}}}));
        let url_only = declared(json!({"elicitation": {"url": {}}}));
        assert!(!can_answer(Some(&form_only), &url));
        assert!(can_answer(Some(&form_only), &form.request));
        assert!(can_answer(Some(&url_only), &url));
        assert!(!can_answer(Some(&url_only), &form.request));
    }
}
