use std::collections::BTreeMap;

use rmcp::model::{CallToolResult, ContentBlock, EmbeddedResource, Resource, ResourceContents};
use serde_json::json;

use super::*;

fn server() -> ServerName {
    ServerName::parse("s").unwrap()
}

fn kinds(response: &proto::CallToolResponse) -> Vec<&Kind> {
    response
        .content
        .iter()
        .map(|c| c.kind.as_ref().unwrap())
        .collect()
}

#[test]
fn every_content_kind_arrives_intact() {
    let png = [0x89, b'P', b'N', b'G'];
    let result = CallToolResult::success(vec![
        ContentBlock::text("one"),
        ContentBlock::image(STANDARD.encode(png), "image/png"),
        ContentBlock::audio(STANDARD.encode(b"RIFF"), "audio/wav"),
        ContentBlock::Resource(EmbeddedResource::new(ResourceContents::text(
            "body", "demo://t",
        ))),
        ContentBlock::Resource(EmbeddedResource::new(
            ResourceContents::BlobResourceContents {
                uri: "demo://b".into(),
                mime_type: Some("application/octet-stream".into()),
                blob: STANDARD.encode([0u8, 1, 2]),
                meta: None,
            },
        )),
        ContentBlock::ResourceLink(
            Resource::new("demo://l", "linked")
                .with_description("a link")
                .with_mime_type("text/plain")
                .with_size(7),
        ),
        ContentBlock::text("two"),
    ]);
    let response = call_response(&server(), result).unwrap();
    assert_eq!(response.text, "one\ntwo");
    assert_eq!(response.server, "s");
    assert!(!response.is_error);
    let kinds = kinds(&response);
    assert!(matches!(kinds[0], Kind::Text(t) if t.text == "one"));
    assert!(matches!(kinds[1], Kind::Image(i) if i.data == png && i.mime_type == "image/png"));
    assert!(matches!(kinds[2], Kind::Audio(a) if a.data == b"RIFF" && a.mime_type == "audio/wav"));
    assert!(matches!(kinds[3], Kind::Resource(r)
        if r.uri == "demo://t" && r.mime_type == "text/plain" && r.contents == Some(Contents::Text("body".into()))));
    assert!(matches!(kinds[4], Kind::Resource(r)
        if r.contents == Some(Contents::Blob(vec![0, 1, 2]))));
    assert!(matches!(kinds[5], Kind::ResourceLink(l)
        if l.uri == "demo://l" && l.name == "linked" && l.description == "a link" && l.size == Some(7)));
}

#[test]
fn structured_content_and_tool_errors_pass_through() {
    let mut result = CallToolResult::structured(json!({"sum": 3, "items": [1, 2]}));
    result.is_error = Some(true);
    let response = call_response(&server(), result).unwrap();
    assert!(response.is_error);
    assert_eq!(
        response.structured_content_json,
        r#"{"sum":3,"items":[1,2]}"#
    );
}

#[test]
fn invalid_base64_is_a_bad_result() {
    let result = CallToolResult::success(vec![ContentBlock::image("not base64!", "image/png")]);
    let err = call_response(&server(), result).unwrap_err();
    assert!(
        matches!(&err, RequestError::BadResult { reason, .. } if reason.contains("image data is not valid base64")),
        "{err:?}"
    );
}

fn pv(kind: prost_types::value::Kind) -> prost_types::Value {
    prost_types::Value { kind: Some(kind) }
}

#[test]
fn structs_become_json_objects() {
    use prost_types::value::Kind as V;
    let inner = prost_types::Struct {
        fields: BTreeMap::from([("deep".to_string(), pv(V::BoolValue(true)))]),
    };
    let fields = prost_types::Struct {
        fields: BTreeMap::from([
            ("n".to_string(), pv(V::NumberValue(2.5))),
            ("s".to_string(), pv(V::StringValue("x".into()))),
            ("z".to_string(), pv(V::NullValue(0))),
            (
                "l".to_string(),
                pv(V::ListValue(prost_types::ListValue {
                    values: vec![pv(V::NumberValue(1.0))],
                })),
            ),
            ("o".to_string(), pv(V::StructValue(inner))),
        ]),
    };
    let json = Value::Object(struct_to_json(fields).unwrap());
    assert_eq!(
        json,
        json!({"n": 2.5, "s": "x", "z": null, "l": [1.0], "o": {"deep": true}})
    );
}

#[test]
fn non_finite_numbers_are_invalid_arguments() {
    let fields = prost_types::Struct {
        fields: BTreeMap::from([(
            "bad".to_string(),
            pv(prost_types::value::Kind::NumberValue(f64::NAN)),
        )]),
    };
    let err = struct_to_json(fields).unwrap_err();
    assert!(
        matches!(&err, RequestError::InvalidArguments(m) if m.starts_with("arguments.bad:")),
        "{err:?}"
    );
}

#[test]
fn negative_timeouts_are_invalid() {
    let negative = prost_types::Duration {
        seconds: -1,
        nanos: 0,
    };
    assert!(matches!(
        duration(negative),
        Err(RequestError::InvalidArguments(_))
    ));
    let ok = prost_types::Duration {
        seconds: 1,
        nanos: 500_000_000,
    };
    assert_eq!(duration(ok).unwrap(), Duration::from_millis(1500));
}

#[test]
fn non_finite_numbers_are_named_by_their_path() {
    use prost_types::value::Kind as V;
    let list = pv(V::ListValue(prost_types::ListValue {
        values: vec![pv(V::NumberValue(1.0)), pv(V::NumberValue(f64::INFINITY))],
    }));
    let inner = prost_types::Struct {
        fields: BTreeMap::from([("xs".to_string(), list)]),
    };
    let fields = prost_types::Struct {
        fields: BTreeMap::from([
            ("ok".to_string(), pv(V::NumberValue(2.0))),
            ("point".to_string(), pv(V::StructValue(inner))),
        ]),
    };
    assert_eq!(
        struct_to_json(fields).unwrap_err(),
        RequestError::InvalidArguments("arguments.point.xs[1]: inf is not a JSON number".into())
    );
}

#[test]
fn json_becomes_a_struct_of_doubles() {
    use prost_types::value::Kind as V;
    let object = json!({"n": 3, "big": 9_007_199_254_740_993_u64, "z": null, "l": [true, "s"]});
    let Value::Object(object) = object else {
        unreachable!()
    };
    let fields = json_to_struct(&object).fields;
    assert_eq!(fields["n"], pv(V::NumberValue(3.0)));
    // Beyond 2^53 a double cannot hold every integer: arguments_json can.
    assert_eq!(fields["big"], pv(V::NumberValue(9_007_199_254_740_992.0)));
    assert_eq!(fields["z"], pv(V::NullValue(0)));
    assert_eq!(
        fields["l"],
        pv(V::ListValue(prost_types::ListValue {
            values: vec![pv(V::BoolValue(true)), pv(V::StringValue("s".into()))]
        }))
    );
}

/// Property tests: `google.protobuf.Struct` ↔ JSON, over generated trees of bounded depth
/// and size.
mod properties {
    use proptest::{collection, prelude::*};
    use prost_types::{ListValue, Struct, value::Kind as V};
    use serde_json::{Map, Number, Value};

    use super::pv;
    use crate::{
        domain::request_error::RequestError,
        grpc::convert::{json_to_struct, struct_to_json},
    };

    /// Any finite double: normal, subnormal and zero, of either sign, and whole numbers.
    fn finite() -> impl Strategy<Value = f64> {
        use proptest::num::f64 as f;
        prop_oneof![
            f::POSITIVE | f::NEGATIVE | f::NORMAL | f::SUBNORMAL | f::ZERO,
            any::<i32>().prop_map(f64::from),
        ]
    }

    /// Field names: empty, unicode, and characters that mean something in paths.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![".{0,6}", "[a-c.\\[\\]]{0,3}"]
    }

    /// A `google.protobuf.Value` tree with only finite numbers, in canonical form (nulls
    /// as `NullValue(0)`, which is what JSON null comes back as).
    fn proto_value() -> impl Strategy<Value = prost_types::Value> {
        let leaf = prop_oneof![
            Just(V::NullValue(0)),
            any::<bool>().prop_map(V::BoolValue),
            finite().prop_map(V::NumberValue),
            ".{0,8}".prop_map(V::StringValue),
        ]
        .prop_map(pv);
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                collection::vec(inner.clone(), 0..6)
                    .prop_map(|values| pv(V::ListValue(ListValue { values }))),
                proto_struct_of(inner).prop_map(|s| pv(V::StructValue(s))),
            ]
        })
    }

    fn proto_struct_of(
        value: impl Strategy<Value = prost_types::Value>,
    ) -> impl Strategy<Value = Struct> {
        collection::btree_map(key(), value, 0..6).prop_map(|fields| Struct { fields })
    }

    /// A JSON value tree with finite numbers of every representation (u64, i64, f64).
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            finite().prop_map(|n| Value::Number(Number::from_f64(n).expect("finite"))),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                json_object_of(inner).prop_map(Value::Object),
            ]
        })
    }

    fn json_object_of(
        value: impl Strategy<Value = Value>,
    ) -> impl Strategy<Value = Map<String, Value>> {
        collection::vec((key(), value), 0..6).prop_map(|fields| fields.into_iter().collect())
    }

    /// Whether `converted` is `original` with every number a float of the same value
    /// (objects compared by their fields, whatever their order).
    fn same_as_doubles(original: &Value, converted: &Value) -> bool {
        match (original, converted) {
            (Value::Number(a), Value::Number(b)) => b.is_f64() && a.as_f64() == b.as_f64(),
            (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_as_doubles(a, b))
            }
            (Value::Object(a), Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(k, a)| b.get(k).is_some_and(|b| same_as_doubles(a, b)))
            }
            (a, b) => a == b,
        }
    }

    /// One step of the path to a value: a field of a struct (among other fields) or an
    /// element of a list (among other elements).
    #[derive(Debug, Clone)]
    enum Step {
        Field(String, Struct),
        Element(Vec<prost_types::Value>, Vec<prost_types::Value>),
    }

    fn step() -> impl Strategy<Value = Step> {
        let siblings = || collection::vec(proto_value(), 0..3);
        prop_oneof![
            (key(), proto_struct_of(proto_value())).prop_map(|(k, s)| Step::Field(k, s)),
            (siblings(), siblings()).prop_map(|(before, after)| Step::Element(before, after)),
        ]
    }

    /// `value` placed at the end of `path` under a top-level field `top` of `fields`, and
    /// the path as the error message spells it.
    fn place(
        value: prost_types::Value,
        top: String,
        path: Vec<Step>,
        mut fields: Struct,
    ) -> (Struct, String) {
        let mut value = value;
        let mut spelled = String::new();
        for step in path.into_iter().rev() {
            value = match step {
                Step::Field(name, mut around) => {
                    spelled = format!(".{name}{spelled}");
                    around.fields.insert(name, value);
                    pv(V::StructValue(around))
                }
                Step::Element(mut values, after) => {
                    spelled = format!("[{}]{spelled}", values.len());
                    values.push(value);
                    values.extend(after);
                    pv(V::ListValue(ListValue { values }))
                }
            };
        }
        spelled = format!("arguments.{top}{spelled}");
        fields.fields.insert(top, value);
        (fields, spelled)
    }

    proptest! {
        #[test]
        fn structs_with_finite_numbers_survive_a_round_trip_through_json(
            fields in proto_struct_of(proto_value())
        ) {
            let json = struct_to_json(fields.clone()).expect("finite numbers are JSON");
            prop_assert_eq!(json_to_struct(&json), fields);
        }

        #[test]
        fn json_survives_a_round_trip_through_a_struct_as_doubles(
            object in json_object_of(json_value())
        ) {
            let back = struct_to_json(json_to_struct(&object)).expect("finite numbers are JSON");
            let (original, back) = (Value::Object(object), Value::Object(back));
            prop_assert!(same_as_doubles(&original, &back), "{} became {}", original, back);
        }

        #[test]
        fn a_non_finite_number_is_invalid_arguments_at_its_path(
            bad in prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY)],
            top in key(),
            path in collection::vec(step(), 0..4),
            fields in proto_struct_of(proto_value()),
        ) {
            let (fields, spelled) = place(pv(V::NumberValue(bad)), top, path, fields);
            let expected = format!("{spelled}: {bad} is not a JSON number");
            prop_assert_eq!(struct_to_json(fields), Err(RequestError::InvalidArguments(expected)));
        }
    }
}
