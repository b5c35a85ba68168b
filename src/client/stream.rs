//! `toolbroker call --stream`: the call over CallToolStream, its progress on stderr, and the
//! server's questions answered as the command line says (declined otherwise); sampling is
//! refused, as a terminal has no model.

use anyhow::Context as _;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::{Client, status_error};
use crate::{
    cli::CallArgs,
    proto::json::json_to_struct,
    proto::{self, call_tool_stream_request::Message, call_tool_stream_response::Event},
};

/// How the server's questions are answered.
pub enum Answers {
    /// Declined.
    Decline,
    /// Accepted with this object.
    With(Map<String, Value>),
    /// Accepted with the defaults of the question's schema.
    Defaults,
}

impl Answers {
    /// What `call`'s options say.
    pub fn of(args: &CallArgs) -> anyhow::Result<Self> {
        Ok(match (&args.answer, args.accept_defaults) {
            (Some(json), _) => match serde_json::from_str(json).context("--answer is not JSON")? {
                Value::Object(object) => Answers::With(object),
                _ => anyhow::bail!("--answer must be a JSON object"),
            },
            (None, true) => Answers::Defaults,
            (None, false) => Answers::Decline,
        })
    }

    /// The answer to one question: an action and its content.
    fn to(
        &self,
        question: &proto::ElicitationRequest,
    ) -> (&'static str, Option<Map<String, Value>>) {
        match self {
            Answers::Decline => ("decline", None),
            Answers::With(object) => ("accept", Some(object.clone())),
            Answers::Defaults if question.mode == "form" => {
                ("accept", Some(defaults(&question.requested_schema_json)))
            }
            Answers::Defaults => ("decline", None),
        }
    }
}

/// The `default` of each property of a form's schema.
fn defaults(schema_json: &str) -> Map<String, Value> {
    let schema: Value = serde_json::from_str(schema_json).unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Map::new();
    };
    properties
        .iter()
        .filter_map(|(name, property)| Some((name.clone(), property.get("default")?.clone())))
        .collect()
}

/// Runs the call, showing progress and questions on stderr, and returns its result.
pub async fn call(
    client: &mut Client,
    request: proto::CallToolRequest,
    answers: Answers,
) -> anyhow::Result<proto::CallToolResponse> {
    let (sender, receiver) = mpsc::channel(4);
    let send = |message| proto::CallToolStreamRequest {
        message: Some(message),
    };
    sender.send(send(Message::Call(request))).await?;
    let mut events = client
        .call_tool_stream(ReceiverStream::new(receiver))
        .await
        .map_err(status_error)?
        .into_inner();
    while let Some(event) = events.message().await.map_err(status_error)? {
        match event.event {
            Some(Event::Progress(progress)) => {
                let total = progress.total.map(|t| format!("/{t}")).unwrap_or_default();
                eprintln!(
                    "progress {}{total}: {}",
                    progress.progress, progress.message
                );
            }
            Some(Event::Log(log)) => {
                let logger = if log.logger.is_empty() {
                    String::new()
                } else {
                    format!(" {}", log.logger)
                };
                eprintln!("log {}{logger}: {}", log.level, log.data_json);
            }
            Some(Event::Elicitation(question)) => {
                let (action, content) = answers.to(&question);
                eprintln!("the server asks: {} ({action})", question.message);
                let response = proto::ElicitationResponse {
                    id: question.id,
                    action: action.into(),
                    content: content.as_ref().map(json_to_struct),
                };
                let _ = sender
                    .send(send(Message::ElicitationResponse(response)))
                    .await;
            }
            Some(Event::Sampling(request)) => {
                eprintln!("the server asks for a model completion: refused");
                let response = proto::SamplingResponse {
                    id: request.id,
                    result_json: String::new(),
                    error: "the toolbroker command line has no model to sample".into(),
                };
                let _ = sender.send(send(Message::SamplingResponse(response))).await;
            }
            Some(Event::Result(result)) => return Ok(result),
            None => {}
        }
    }
    anyhow::bail!("the stream ended without a result")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_taken_from_each_property() {
        let schema = r#"{"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "free": {"type": "string"}}}"#;
        let got = defaults(schema);
        assert_eq!(
            Value::Object(got),
            serde_json::json!({"name": "John Doe", "age": 30})
        );
        assert!(defaults("not json").is_empty());
    }
}
