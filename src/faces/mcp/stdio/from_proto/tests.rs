use rmcp::model::ErrorCode;

use super::*;
use crate::faces::mcp::lists::Stale;
use crate::proto::{content::Kind, embedded_resource::Contents};

fn block(kind: Kind) -> proto::Content {
    proto::Content { kind: Some(kind) }
}

#[test]
fn a_tool_keeps_its_raw_schemas_and_hints() {
    let listed = proto::Tool {
        name: "d_stats".into(),
        description: "Computes statistics.".into(),
        input_schema_json:
            r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#.into(),
        output_schema_json: r#"{"type":"object","properties":{"mean":{"type":"number"}}}"#.into(),
        annotations: Some(proto::ToolAnnotations {
            title: "Statistics".into(),
            read_only_hint: Some(true),
            destructive_hint: None,
            idempotent_hint: Some(false),
            open_world_hint: Some(false),
        }),
        title: "Stats".into(),
        icons: vec![proto::Icon {
            src: "https://example.com/stats.svg".into(),
            mime_type: "image/svg+xml".into(),
            sizes: vec!["any".into()],
            theme: String::new(),
        }],
        ..Default::default()
    };
    let shown = tool(&listed);
    let json = serde_json::to_value(&shown).unwrap();
    assert_eq!(
        json,
        json!({
            "name": "d_stats",
            "title": "Stats",
            "description": "Computes statistics.",
            "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}},
                            "required": ["n"]},
            "outputSchema": {"type": "object", "properties": {"mean": {"type": "number"}}},
            "annotations": {"title": "Statistics", "readOnlyHint": true, "idempotentHint": false,
                            "openWorldHint": false},
            "icons": [{"src": "https://example.com/stats.svg", "mimeType": "image/svg+xml",
                       "sizes": ["any"]}],
        })
    );
    // From a broker before `Tool.title`: the annotations' title shows.
    let older = tool(&proto::Tool {
        title: String::new(),
        ..listed
    });
    assert_eq!(older.title.as_deref(), Some("Statistics"));
}

#[test]
fn a_bare_tool_has_no_optional_fields() {
    let tool = tool(&proto::Tool {
        name: "t".into(),
        input_schema_json: "not json".into(),
        annotations: Some(proto::ToolAnnotations::default()),
        ..Default::default()
    });
    assert_eq!(
        serde_json::to_value(&tool).unwrap(),
        json!({"name": "t", "inputSchema": {"type": "object"}})
    );
}

#[test]
fn every_content_kind_comes_back_as_mcp_content() {
    let response = proto::CallToolResponse {
        content: vec![
            block(Kind::Text(proto::TextContent { text: "hi".into() })),
            block(Kind::Image(proto::ImageContent {
                data: vec![1, 2, 3],
                mime_type: "image/png".into(),
            })),
            block(Kind::Audio(proto::AudioContent {
                data: vec![0xff],
                mime_type: "audio/wav".into(),
            })),
            block(Kind::Resource(proto::EmbeddedResource {
                uri: "x://t".into(),
                mime_type: String::new(),
                contents: Some(Contents::Text("body".into())),
            })),
            block(Kind::Resource(proto::EmbeddedResource {
                uri: "x://b".into(),
                mime_type: "application/octet-stream".into(),
                contents: Some(Contents::Blob(vec![0, 255])),
            })),
            block(Kind::ResourceLink(proto::ResourceLink {
                uri: "x://l".into(),
                name: "l".into(),
                size: Some(7),
                ..Default::default()
            })),
            proto::Content { kind: None },
        ],
        is_error: true,
        structured_content_json: r#"{"n": 1}"#.into(),
        ..Default::default()
    };
    let result = serde_json::to_value(call_result(response).unwrap()).unwrap();
    assert_eq!(result["isError"], true);
    assert_eq!(result["structuredContent"], json!({"n": 1}));
    assert_eq!(
        result["content"],
        json!([
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AQID", "mimeType": "image/png"},
            {"type": "audio", "data": "/w==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "x://t", "text": "body"}},
            {"type": "resource",
             "resource": {"uri": "x://b", "mimeType": "application/octet-stream", "blob": "AP8="}},
            {"type": "resource_link", "uri": "x://l", "name": "l", "size": 7},
        ])
    );
}

#[test]
fn structured_content_that_is_not_json_is_an_error() {
    let response = proto::CallToolResponse {
        structured_content_json: "{".into(),
        ..Default::default()
    };
    assert!(call_result(response).is_err());
    let plain = call_result(proto::CallToolResponse::default()).unwrap();
    assert_eq!(plain.structured_content, None);
    assert_ne!(plain.is_error, Some(true));
}

#[test]
fn the_brokers_statuses_keep_their_code_and_message_and_others_say_the_link_failed() {
    let status = tonic::Status::permission_denied("the token \"a\" may not call \"t\"");
    assert_eq!(
        refusal(&status),
        Refusal {
            code: Some(Code::PermissionDenied),
            message: "the token \"a\" may not call \"t\"".into(),
        }
    );
    let lost = refusal(&tonic::Status::unknown("transport error"));
    assert_eq!(lost.code, None);
    assert_eq!(
        lost.message,
        "no answer from the broker (Unknown): transport error"
    );
    let error = crate::faces::mcp::model::refusal::refused_call(lost).unwrap_err();
    assert_eq!(error.code, ErrorCode::INTERNAL_ERROR);
}

fn listed() -> proto::ListResourcesResponse {
    let resource = |server: &str, uri: &str| proto::Resource {
        server: server.into(),
        uri: uri.into(),
        ..Default::default()
    };
    let template = |server: &str, uri_template: &str| proto::ResourceTemplate {
        server: server.into(),
        uri_template: uri_template.into(),
        ..Default::default()
    };
    proto::ListResourcesResponse {
        resources: vec![
            resource("a", "demo://readme"),
            resource("b", "demo://echo/fixed"),
        ],
        templates: vec![
            template("a", "demo://{path}"),
            template("c", "demo://echo/{text}"),
            template("e", "demo://echo/{text}/{page}"),
            template("d", "file:///{+path}"),
        ],
    }
}

#[test]
fn a_uri_is_read_from_the_server_that_lists_it_or_whose_template_fits_best() {
    let listed = listed();
    assert_eq!(owner(&listed, "demo://readme"), Some("a"));
    assert_eq!(owner(&listed, "demo://echo/fixed"), Some("b"));
    assert_eq!(owner(&listed, "demo://echo/hello/2"), Some("e"));
    assert_eq!(owner(&listed, "file:///etc/hosts"), Some("d"));
    assert_eq!(owner(&listed, "http://x"), None);
}

#[test]
fn resource_contents_come_back_as_text_or_base64() {
    let response = proto::ReadResourceResponse {
        contents: vec![
            proto::ResourceContents {
                uri: "demo://readme".into(),
                mime_type: "text/plain".into(),
                contents: Some(resource_contents::Contents::Text("about".into())),
            },
            proto::ResourceContents {
                uri: "demo://logo.png".into(),
                mime_type: "image/png".into(),
                contents: Some(resource_contents::Contents::Blob(b"\x89PNG".to_vec())),
            },
        ],
    };
    let json = serde_json::to_value(read_result(response)).unwrap();
    assert_eq!(
        json["contents"],
        json!([
            {"uri": "demo://readme", "mimeType": "text/plain", "text": "about"},
            {"uri": "demo://logo.png", "mimeType": "image/png", "blob": "iVBORw=="},
        ])
    );
}

#[test]
fn prompts_and_their_results_come_back() {
    let listed = prompt(proto::Prompt {
        name: "d_summarize".into(),
        description: "Summarizes.".into(),
        arguments: vec![proto::PromptArgument {
            name: "topic".into(),
            description: "What.".into(),
            required: true,
        }],
        ..Default::default()
    });
    assert_eq!(
        serde_json::to_value(&listed).unwrap(),
        json!({"name": "d_summarize", "description": "Summarizes.",
               "arguments": [{"name": "topic", "description": "What.", "required": true}]})
    );
    let result = prompt_result(proto::GetPromptResponse {
        description: "A summary".into(),
        messages: vec![proto::PromptMessage {
            role: "assistant".into(),
            content: Some(block(Kind::Text(proto::TextContent {
                text: "Sure.".into(),
            }))),
        }],
    })
    .unwrap();
    assert_eq!(result.description.as_deref(), Some("A summary"));
    assert_eq!(result.messages[0].role, Role::Assistant);
    let empty = proto::PromptMessage {
        role: "user".into(),
        content: None,
    };
    let response = proto::GetPromptResponse {
        messages: vec![empty],
        ..Default::default()
    };
    assert!(prompt_result(response).is_err());
}

#[test]
fn prompt_arguments_are_strings() {
    let arguments = json!({"topic": "MCP", "count": 3, "flag": true});
    let got = prompt_arguments(arguments.as_object().cloned());
    assert_eq!(got["topic"], "MCP");
    assert_eq!(got["count"], "3");
    assert_eq!(got["flag"], "true");
    assert!(prompt_arguments(None).is_empty());
}

#[test]
fn progress_keeps_the_clients_token() {
    let token = ProgressToken(rmcp::model::NumberOrString::Number(7));
    let sent = progress(
        token.clone(),
        proto::Progress {
            progress: 2.0,
            total: Some(5.0),
            message: String::new(),
        },
    );
    assert_eq!(sent.progress_token, token);
    assert_eq!(
        (sent.progress, sent.total, sent.message),
        (2.0, Some(5.0), None)
    );
}

#[test]
fn questions_become_elicitation_params_and_answers_go_back() {
    let form = proto::ElicitationRequest {
        id: "e1".into(),
        message: "Your name?".into(),
        requested_schema_json:
            r#"{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}"#
                .into(),
        mode: "form".into(),
        url: String::new(),
        elicitation_id: String::new(),
    };
    match elicit_params(&form) {
        Some(ElicitRequestParams::FormElicitationParams { message, .. }) => {
            assert_eq!(message, "Your name?")
        }
        other => panic!("{other:?}"),
    }
    let url = proto::ElicitationRequest {
        mode: "url".into(),
        url: "https://example.com/auth".into(),
        requested_schema_json: String::new(),
        elicitation_id: "server-7".into(),
        ..form.clone()
    };
    let older_broker = proto::ElicitationRequest {
        elicitation_id: String::new(),
        ..url.clone()
    };
    for (question, id) in [(url, "server-7"), (older_broker, "e1")] {
        match elicit_params(&question) {
            Some(ElicitRequestParams::UrlElicitationParams {
                url,
                elicitation_id,
                ..
            }) => assert_eq!(
                (url.as_str(), elicitation_id.as_str()),
                ("https://example.com/auth", id)
            ),
            other => panic!("{other:?}"),
        }
    }
    let unknown = proto::ElicitationRequest {
        mode: "unknown".into(),
        ..form.clone()
    };
    assert!(elicit_params(&unknown).is_none());
    let broken = proto::ElicitationRequest {
        requested_schema_json: "{".into(),
        ..form
    };
    assert!(elicit_params(&broken).is_none());

    let mut accepted = ElicitResult::new(ElicitationAction::Accept);
    accepted.content = Some(json!({"answer": "Ada"}));
    let answer = elicitation_response("e1".into(), accepted);
    assert_eq!(
        (answer.id.as_str(), answer.action.as_str()),
        ("e1", "accept")
    );
    let content = crate::proto::json::struct_to_json(answer.content.unwrap()).unwrap();
    assert_eq!(Value::Object(content), json!({"answer": "Ada"}));
    let declined = elicitation_response("e2".into(), ElicitResult::new(ElicitationAction::Decline));
    assert_eq!(
        (declined.action.as_str(), declined.content),
        ("decline", None)
    );
    let cancelled = elicitation_response("e3".into(), ElicitResult::new(ElicitationAction::Cancel));
    assert_eq!(cancelled.action, "cancel");
}

#[test]
fn watch_events_name_the_lists_they_change() {
    let tools = Event::ToolsChanged(proto::ToolsChanged::default());
    assert_eq!(
        stale_by(&tools),
        Stale {
            tools: true,
            ..Default::default()
        }
    );
    let resources = Event::ResourcesChanged(proto::ResourcesChanged::default());
    assert_eq!(
        stale_by(&resources),
        Stale {
            resources: true,
            ..Default::default()
        }
    );
    let prompts = Event::PromptsChanged(proto::PromptsChanged::default());
    assert_eq!(
        stale_by(&prompts),
        Stale {
            prompts: true,
            ..Default::default()
        }
    );
    let status = Event::ServerStatus(proto::ServerStatus::default());
    assert_eq!(stale_by(&status), Stale::default());
    let snapshot = Event::Snapshot(proto::Snapshot::default());
    assert_eq!(stale_by(&snapshot), Stale::ALL);
    let burst = stale_by(&tools).union(stale_by(&prompts));
    assert_eq!(
        (burst.tools, burst.resources, burst.prompts),
        (true, false, true)
    );
    assert!(burst.any() && !Stale::default().any());
}

#[test]
fn log_messages_keep_their_level_logger_and_data() {
    let log = log_message(proto::LogMessage {
        level: "warning".into(),
        logger: "db".into(),
        data_json: r#"{"slow": true}"#.into(),
    });
    assert_eq!(
        (log.level, log.logger.as_deref(), log.data),
        (LoggingLevel::Warning, Some("db"), json!({"slow": true}))
    );
    let odd = log_message(proto::LogMessage {
        level: "loud".into(),
        logger: String::new(),
        data_json: "not json".into(),
    });
    assert_eq!(
        (odd.level, odd.logger, odd.data),
        (LoggingLevel::Info, None, json!("not json"))
    );
    assert!(severity(LoggingLevel::Debug) < severity(LoggingLevel::Warning));
    assert!(severity(LoggingLevel::Alert) < severity(LoggingLevel::Emergency));
}
