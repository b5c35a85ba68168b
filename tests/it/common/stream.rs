//! CallToolStream from the client's side: open a stream with the call, read its events, answer
//! the server's elicitation and sampling requests.

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use toolbroker::proto::{
    self, call_tool_stream_request::Message, call_tool_stream_response::Event,
};

use super::{WAIT, broker::Broker, call_request, calls::as_caller};

/// One open CallToolStream.
pub struct StreamCall {
    /// Messages to the broker; dropping it half-closes the stream.
    pub sender: Option<mpsc::Sender<proto::CallToolStreamRequest>>,
    /// Events from the broker.
    pub events: tonic::Streaming<proto::CallToolStreamResponse>,
}

impl Broker {
    /// Opens a CallToolStream calling `name` as the caller with `token` (none: anonymous).
    pub async fn stream_call(
        &self,
        token: Option<&str>,
        name: &str,
        arguments_json: &str,
    ) -> Result<StreamCall, tonic::Status> {
        self.open_stream(token, name, arguments_json, false).await
    }

    /// [`Self::stream_call`], half-closed after the call: the client will answer nothing.
    pub async fn stream_call_half_closed(
        &self,
        name: &str,
        arguments_json: &str,
    ) -> Result<StreamCall, tonic::Status> {
        self.open_stream(None, name, arguments_json, true).await
    }

    async fn open_stream(
        &self,
        token: Option<&str>,
        name: &str,
        arguments_json: &str,
        half_closed: bool,
    ) -> Result<StreamCall, tonic::Status> {
        let (sender, receiver) = mpsc::channel(16);
        let first = proto::CallToolStreamRequest {
            message: Some(Message::Call(call_request(name, arguments_json))),
        };
        sender.send(first).await.expect("the channel is open");
        // The broker answers with its first event, so a client half-closes before waiting.
        let sender = (!half_closed).then_some(sender);
        let request = as_caller(token, &[], ReceiverStream::new(receiver));
        let events = tokio::time::timeout(WAIT, self.client.clone().call_tool_stream(request))
            .await
            .expect("CallToolStream answered in time")?
            .into_inner();
        Ok(StreamCall { sender, events })
    }
}

impl StreamCall {
    /// The next event; `Err` if the stream ended with a status, `Ok(None)` at its end.
    pub async fn next(&mut self) -> Result<Option<Event>, tonic::Status> {
        let message = tokio::time::timeout(WAIT, self.events.message())
            .await
            .expect("an event within WAIT")?;
        Ok(message.map(|m| m.event.expect("every response has an event")))
    }

    /// Reads to the result, answering nothing: the progress events seen, then the result.
    pub async fn result(
        &mut self,
    ) -> Result<(Vec<proto::Progress>, proto::CallToolResponse), tonic::Status> {
        let mut progress = Vec::new();
        loop {
            match self.next().await? {
                Some(Event::Progress(p)) => progress.push(p),
                Some(Event::Result(result)) => {
                    assert!(
                        self.next().await?.is_none(),
                        "the result is the last message"
                    );
                    return Ok((progress, result));
                }
                Some(other) => panic!("unexpected event {other:?}"),
                None => panic!("the stream ended without a result"),
            }
        }
    }

    /// Sends a message to the broker.
    pub async fn send(&self, message: Message) {
        let sender = self.sender.as_ref().expect("not half-closed");
        sender
            .send(proto::CallToolStreamRequest {
                message: Some(message),
            })
            .await
            .expect("the stream is open");
    }

    /// Answers elicitation `id` with `action` and, for accept, `content` (a JSON object).
    pub async fn answer_elicitation(
        &self,
        id: &str,
        action: &str,
        content: Option<serde_json::Value>,
    ) {
        let content = content.map(|value| {
            let serde_json::Value::Object(map) = value else {
                panic!("content is an object")
            };
            toolbroker::proto::json::json_to_struct(&map)
        });
        self.send(Message::ElicitationResponse(proto::ElicitationResponse {
            id: id.into(),
            action: action.into(),
            content,
        }))
        .await;
    }

    /// Answers sampling request `id` with `result` (a JSON object) or, when `Err`, refuses it
    /// with that message.
    pub async fn answer_sampling(&self, id: &str, answer: Result<serde_json::Value, &str>) {
        let (result_json, error) = match answer {
            Ok(result) => (result.to_string(), String::new()),
            Err(message) => (String::new(), message.to_owned()),
        };
        self.send(Message::SamplingResponse(proto::SamplingResponse {
            id: id.into(),
            result_json,
            error,
        }))
        .await;
    }
}
