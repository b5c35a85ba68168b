//! MCP 2026-07-28's multi round-trip requests (MRTR), on the client side: a server that needs
//! the user or the client's model answers a call `input_required` with its questions and an
//! opaque `requestState`; the broker puts the questions to the call's own client (its stream:
//! the answer belongs to the request the broker sent, so no routing can go wrong), then sends
//! the call again with the answers and the state unchanged. A request declares, in its own
//! metadata, what its client can answer: a unary call (no stream) declares neither
//! elicitation nor sampling, and a server that asks anyway is declined or refused.

// Sampling and roots are deprecated by MCP 2026-07-28 (SEP-2577) but remain in it (MRTR).
#![expect(
    deprecated,
    reason = "sampling and roots remain in 2026-07-28 as input requests"
)]

use rmcp::model::{
    ClientCapabilities, ElicitResult, ElicitationAction, Implementation, InputRequest,
    InputRequests, InputResponses, JsonObject, ListRootsResult, ProtocolVersion, RequestMetaObject,
    TASKS_EXTENSION_ID,
};

use crate::{
    conversation::{Answers, Conversation},
    upstream::session::listen::Watched,
};

/// How many times one call may come back `input_required` before the server counts as broken
/// (rmcp's own client stops at the same number).
pub const MAX_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// What a session on 2026-07-28 (stateless) needs for its requests and their rounds.
#[derive(Debug)]
pub struct Stateless {
    /// Everything the broker's client side can do (what a streaming call declares).
    capabilities: ClientCapabilities,
    /// The answer to `roots/list`.
    roots: ListRootsResult,
    /// The resources the session's listen stream follows.
    pub watched: Watched,
    /// What [`Self::stamp`] writes for each of what a call's client can answer (by
    /// [`stamp_index`]), made once: rmcp's setters serialize their structs every time, and a
    /// call paid for that (issue 42, round four).
    stamped: [RequestMetaObject; 4],
}

/// Where [`Stateless::stamp`]'s metadata for `client` is kept.
fn stamp_index(client: Option<Answers>) -> usize {
    client.map_or(0, |client| {
        usize::from(client.elicit) | (usize::from(client.sample) << 1)
    })
}

impl Stateless {
    /// A session's on `version`: its handler's `client` info, `capabilities` and `roots`.
    pub fn new(
        version: ProtocolVersion,
        client: Implementation,
        capabilities: ClientCapabilities,
        roots: ListRootsResult,
    ) -> Self {
        let mut capabilities = capabilities;
        // A server may answer a call with a task: the broker follows it for the caller
        // (`followed_task`). Declared once here, not built again for every request.
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
        let mut stateless = Self {
            capabilities,
            roots,
            watched: Watched::default(),
            stamped: Default::default(),
        };
        for (elicit, sample) in [(false, false), (true, false), (false, true), (true, true)] {
            let answers = Some(Answers { elicit, sample });
            let mut meta = RequestMetaObject::default();
            meta.set_protocol_version(version.clone());
            meta.set_client_info(client.clone());
            meta.set_client_capabilities(stateless.capabilities(answers));
            stateless.stamped[stamp_index(answers)] = meta;
        }
        stateless
    }

    /// Writes what every request of the version carries into `meta`: the version, the
    /// broker's info, and the capabilities [`Self::capabilities`] gives for `client`. (rmcp
    /// adds the same to what it sends; a call on the stdio lane is sent without it.)
    pub fn stamp(&self, meta: &mut RequestMetaObject, client: Option<Answers>) {
        let object: &mut JsonObject = meta;
        for (key, value) in self.stamped[stamp_index(client)].iter() {
            object.insert(key.clone(), value.clone());
        }
    }

    /// What a request declares: what the call's client can answer (`None`: no client), and
    /// what the broker answers itself (roots).
    pub fn capabilities(&self, client: Option<Answers>) -> ClientCapabilities {
        let mut capabilities = self.capabilities.clone();
        let client = client.unwrap_or(Answers {
            elicit: false,
            sample: false,
        });
        if !client.elicit {
            capabilities.elicitation = None;
        }
        if !client.sample {
            capabilities.sampling = None;
        }
        capabilities
    }

    /// Answers every one of `requests`, through the call's client where there is one: a
    /// question no client can answer is declined; a sampling request without a client, or
    /// one its client refused, ends the call (MRTR has no error answer) with why.
    pub async fn answer(
        &self,
        requests: InputRequests,
        conversation: Option<&Conversation>,
    ) -> Result<InputResponses, String> {
        let mut answers = InputResponses::new();
        for (key, request) in requests {
            let answer = match (request, conversation) {
                (InputRequest::Elicitation(request), Some(conversation))
                    if conversation.is_open() =>
                {
                    to_value(&conversation.elicit(request.params).await)
                }
                (InputRequest::Elicitation(_), _) => {
                    to_value(&ElicitResult::new(ElicitationAction::Decline))
                }
                (InputRequest::CreateMessage(request), Some(conversation))
                    if conversation.is_open() =>
                {
                    let result = conversation.sample(request.params).await?;
                    to_value(&result)
                }
                (InputRequest::CreateMessage(_), _) => {
                    return Err(
                        "it asked for sampling, and this call has no client to ask (use \
                                CallToolStream)"
                            .into(),
                    );
                }
                (InputRequest::ListRoots(_), _) => to_value(&self.roots),
                (other, _) => {
                    let what = serde_json::to_value(&other).ok();
                    let method = what.as_ref().and_then(|v| v["method"].as_str());
                    return Err(format!(
                        "it asked for input of a kind the broker does not know ({})",
                        method.unwrap_or("unnamed")
                    ));
                }
            };
            answers.insert(key, answer);
        }
        Ok(answers)
    }
}

fn to_value(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).expect("rmcp's results serialize")
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CreateMessageRequest, CreateMessageRequestParams, ElicitRequest, ElicitRequestParams,
        ElicitationSchema, ListRootsRequest, Root,
    };

    use super::*;
    use crate::conversation::Interaction;

    fn stateless() -> Stateless {
        let mut capabilities = ClientCapabilities::default();
        capabilities.sampling = Some(Default::default());
        capabilities.elicitation = Some(Default::default());
        capabilities.roots = Some(Default::default());
        let roots = ListRootsResult::new(vec![Root::new("file:///work".to_owned())]);
        let client = Implementation::new("toolbroker", "1");
        Stateless::new(ProtocolVersion::V_2026_07_28, client, capabilities, roots)
    }

    fn question() -> InputRequest {
        InputRequest::Elicitation(ElicitRequest::new(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: "name?".into(),
                requested_schema: ElicitationSchema::builder()
                    .required_string("name")
                    .build()
                    .unwrap(),
            },
        ))
    }

    fn sampling() -> InputRequest {
        InputRequest::CreateMessage(CreateMessageRequest::new(CreateMessageRequestParams::new(
            vec![],
            10,
        )))
    }

    #[test]
    fn a_request_declares_what_its_calls_client_can_answer() {
        let unary = stateless().capabilities(None);
        assert!(unary.elicitation.is_none() && unary.sampling.is_none());
        assert!(unary.roots.is_some());
        let streaming = stateless().capabilities(Some(Answers::ALL));
        assert!(streaming.elicitation.is_some() && streaming.sampling.is_some());
        let only_the_user = Answers {
            elicit: true,
            sample: false,
        };
        let user = stateless().capabilities(Some(only_the_user));
        assert!(user.elicitation.is_some() && user.sampling.is_none());
    }

    #[test]
    fn a_request_carries_the_version_the_broker_and_its_capabilities() {
        let mut meta = RequestMetaObject::default();
        stateless().stamp(&mut meta, None);
        assert!(
            meta.missing_required_keys(&ProtocolVersion::V_2026_07_28)
                .is_empty()
        );
        assert_eq!(meta.protocol_version(), Some(ProtocolVersion::V_2026_07_28));
        assert_eq!(meta.client_info().unwrap().name, "toolbroker");
        assert!(meta.client_capabilities().unwrap().elicitation.is_none());

        // What is kept is what rmcp's setters write, for each kind of client, over what the
        // request already carries.
        let stateless = stateless();
        for client in [None, Some(Answers::ALL)].into_iter().chain(
            [(true, false), (false, true), (false, false)]
                .map(|(elicit, sample)| Some(Answers { elicit, sample })),
        ) {
            let mut kept = RequestMetaObject::default();
            kept.set_progress_token(rmcp::model::ProgressToken(
                rmcp::model::NumberOrString::Number(7),
            ));
            let mut set = kept.clone();
            stateless.stamp(&mut kept, client);
            set.set_protocol_version(ProtocolVersion::V_2026_07_28);
            set.set_client_info(Implementation::new("toolbroker", "1"));
            set.set_client_capabilities(stateless.capabilities(client));
            assert_eq!(kept, set, "{client:?}");
        }
    }

    #[tokio::test]
    async fn without_a_client_questions_are_declined_roots_answered_and_sampling_refused() {
        let requests = InputRequests::from([
            ("q".to_owned(), question()),
            (
                "r".to_owned(),
                InputRequest::ListRoots(ListRootsRequest::default()),
            ),
        ]);
        let answers = stateless().answer(requests, None).await.unwrap();
        assert_eq!(answers["q"]["action"], "decline");
        assert_eq!(answers["r"]["roots"][0]["uri"], "file:///work");

        let requests = InputRequests::from([("s".to_owned(), sampling())]);
        let refused = stateless().answer(requests, None).await.unwrap_err();
        assert!(refused.contains("CallToolStream"), "{refused}");
    }

    #[tokio::test]
    async fn a_streaming_calls_client_answers_each_question_under_its_key() {
        let (conversation, mut events) = Conversation::new();
        let client = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                if let Interaction::Elicit { answer, .. } = event {
                    let mut accepted = ElicitResult::new(ElicitationAction::Accept);
                    accepted.content = Some(serde_json::json!({"name": "Ada"}));
                    let _ = answer.send(accepted);
                }
            }
        });
        let requests = InputRequests::from([
            ("first".to_owned(), question()),
            ("second".to_owned(), question()),
        ]);
        let answers = stateless()
            .answer(requests, Some(&conversation))
            .await
            .unwrap();
        for key in ["first", "second"] {
            assert_eq!(answers[key]["action"], "accept");
            assert_eq!(answers[key]["content"]["name"], "Ada");
        }
        conversation.close();
        drop(conversation);
        client.await.unwrap();
    }
}
