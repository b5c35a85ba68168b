use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::domain::request_error::RequestError;

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
        proto::json::{json_to_struct, struct_to_json},
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
