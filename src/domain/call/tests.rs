use std::time::Duration;

use serde_json::{Value, json};

use super::*;

fn structured(args: Value) -> RawArguments {
    let Value::Object(map) = args else {
        panic!("test arguments must be an object")
    };
    RawArguments {
        structured: Some(map),
        json: String::new(),
    }
}

fn json_text(text: &str) -> RawArguments {
    RawArguments {
        structured: None,
        json: text.into(),
    }
}

fn prepared(raw: RawArguments, schema: Value) -> Result<String, RequestError> {
    prepare_arguments(raw, &schema).map(|m| Value::Object(m).to_string())
}

#[test]
fn whole_numbers_become_integers_unless_the_schema_says_number() {
    let schema = json!({
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "list": {"type": "array", "items": {"type": "integer"}},
            "floats": {"type": "array", "items": {"type": "number"}},
            "nested": {"$ref": "#/$defs/Inner"}
        },
        "$defs": {"Inner": {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}}}
    });
    let args = json!({
        "count": 3.0, "ratio": 2.0, "maybe": 7.0, "list": [1.0, 2.0], "floats": [1.0],
        "nested": {"n": 4.0, "x": 5.0}, "unknown": 6.0, "half": 1.5
    });
    assert_eq!(
        prepared(structured(args), schema).unwrap(),
        r#"{"count":3,"ratio":2.0,"maybe":7,"list":[1,2],"floats":[1.0],"nested":{"n":4,"x":5.0},"unknown":6,"half":1.5}"#
    );
}

#[test]
fn huge_floats_stay_floats() {
    let out = prepared(structured(json!({"n": 1e300})), json!({})).unwrap();
    assert_eq!(out, r#"{"n":1e+300}"#);
}

#[test]
fn arguments_json_is_passed_on_exactly() {
    let out = prepared(
        json_text(r#"{"big": 9007199254740993, "f": 1.0}"#),
        json!({}),
    )
    .unwrap();
    assert_eq!(out, r#"{"big":9007199254740993,"f":1.0}"#);
}

#[test]
fn no_arguments_is_an_empty_object() {
    assert_eq!(prepared(json_text("  "), json!({})).unwrap(), "{}");
    assert_eq!(prepared(RawArguments::default(), json!({})).unwrap(), "{}");
}

#[test]
fn bad_arguments_are_invalid_with_a_reason() {
    let cases = [
        (json_text("[1, 2]"), "must be a JSON object, not an array"),
        (json_text("5"), "not a number"),
        (json_text("\"s\""), "not a string"),
        (json_text("{oops"), "not valid JSON"),
        (
            RawArguments {
                structured: Some(Default::default()),
                json: "{}".into(),
            },
            "not both",
        ),
    ];
    for (raw, want) in cases {
        let err = prepare_arguments(raw.clone(), &json!({})).unwrap_err();
        let RequestError::InvalidArguments(message) = &err else {
            panic!("{raw:?}: {err:?}")
        };
        assert!(message.contains(want), "{raw:?}: {message}");
    }
}

#[test]
fn self_referencing_schemas_terminate() {
    let schema = json!({"$ref": "#", "properties": {"a": {"$ref": "#"}}});
    let out = prepared(structured(json!({"a": {"a": {"a": 1.0}}})), schema).unwrap();
    assert_eq!(out, r#"{"a":{"a":{"a":1}}}"#);
}

#[test]
fn timeout_is_the_smallest_of_request_server_and_deadline() {
    let s = Duration::from_secs;
    let cases = [
        (None, s(30), None, s(30)),
        (Some(s(5)), s(30), None, s(5)),
        (Some(s(60)), s(30), None, s(30)),
        (None, s(30), Some(s(2)), s(2)),
        (Some(s(10)), s(30), Some(s(20)), s(10)),
    ];
    for (requested, server, deadline, want) in cases {
        assert_eq!(
            effective_timeout(requested, server, deadline).unwrap(),
            want
        );
    }
    assert!(matches!(
        effective_timeout(Some(Duration::ZERO), s(30), None),
        Err(RequestError::InvalidArguments(_))
    ));
}

#[test]
fn streaming_calls_are_restarted_up_to_the_max_timeout_or_the_deadline() {
    let s = Duration::from_secs;
    let timing = Timing::streaming(None, s(1), s(2), None).unwrap();
    assert_eq!(
        timing,
        Timing {
            timeout: s(1),
            max: s(2)
        }
    );
    let capped = Timing::streaming(Some(s(5)), s(30), s(300), Some(s(60))).unwrap();
    assert_eq!(
        capped,
        Timing {
            timeout: s(5),
            max: s(60)
        },
        "the deadline caps the max"
    );
    let short = Timing::streaming(None, s(30), s(300), Some(s(10))).unwrap();
    assert_eq!(
        short,
        Timing {
            timeout: s(10),
            max: s(10)
        }
    );
    assert_eq!(Timing::unary(s(3)).max, s(3));
    assert!(Timing::streaming(Some(Duration::ZERO), s(1), s(2), None).is_err());
}
