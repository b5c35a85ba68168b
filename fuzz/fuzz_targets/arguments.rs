//! `domain::call::prepare_arguments` with any arguments and any schema. Deeply nested and
//! self-referencing `$ref` schemas are the interesting inputs: the rules must neither panic
//! nor hang, and may change only how numbers are written, never what they are.
//!
//! Input: one byte saying how the arguments arrive, then the schema and the arguments as
//! JSON text separated by a NUL byte, e.g. `S{"type":"object"}\0{"a":1}`.
//! - `S`: as the `arguments` Struct (the text must be a JSON object; it goes through
//!   `json_to_struct` and `struct_to_json` as a client's JSON does, so numbers are doubles);
//! - `B`: as both the Struct and `arguments_json` (which must be refused when not blank);
//! - anything else: as `arguments_json`, the text as it is.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use toolbroker::{domain::{call::{RawArguments, prepare_arguments}, request_error::RequestError}, proto::json::{json_to_struct, struct_to_json}};

/// Whether `prepared` is `given` with only numbers rewritten, to the same value.
fn same_but_numbers(given: &Value, prepared: &Value) -> bool {
    match (given, prepared) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_but_numbers(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter().zip(b).all(|((ka, a), (kb, b))| ka == kb && same_but_numbers(a, b))
        }
        (a, b) => a == b,
    }
}

/// The arguments as the `arguments` Struct brings them, if the text is a JSON object.
fn structured(text: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str(text) {
        Ok(Value::Object(object)) => struct_to_json(json_to_struct(&object)).ok(),
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let (schema, arguments) = text.split_once('\0').unwrap_or((text, ""));
    let Ok(schema) = serde_json::from_str::<Value>(schema) else {
        return;
    };
    match mode {
        b'S' | b'B' => {
            let Some(given) = structured(arguments) else {
                return;
            };
            let json = if mode == b'B' { arguments.to_owned() } else { String::new() };
            let raw = RawArguments { structured: Some(given.clone()), json };
            match prepare_arguments(raw, &schema) {
                Ok(prepared) => {
                    assert!(mode == b'S' || arguments.trim().is_empty());
                    let (given, prepared) = (Value::Object(given), Value::Object(prepared));
                    assert!(same_but_numbers(&given, &prepared), "{given} became {prepared}");
                }
                Err(e) => assert!(
                    mode == b'B' && matches!(e, RequestError::InvalidArguments(_)),
                    "{e:?}"
                ),
            }
        }
        _ => {
            let raw = RawArguments { structured: None, json: arguments.to_owned() };
            // Passed on exactly: what parses is what is sent.
            if let Ok(prepared) = prepare_arguments(raw, &schema) {
                let expected = match arguments.trim() {
                    "" => Map::new(),
                    text => serde_json::from_str(text).expect("accepted text is JSON"),
                };
                assert_eq!(prepared, expected);
            }
        }
    }
});
