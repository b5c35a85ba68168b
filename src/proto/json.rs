//! `google.protobuf.Struct` and JSON objects, both ways: how tool arguments and structured
//! answers cross between the proto and MCP. Pure; used by every face and the client.

use serde_json::{Map, Number, Value};

use crate::domain::request_error::RequestError;

/// A `google.protobuf.Struct` as a JSON object. Numbers come out as floats; the call rules
/// decide which of them are integers. A number JSON cannot hold (NaN, ±infinity) is the
/// caller's mistake, named by its path: `arguments.point.xs[2]`.
pub fn struct_to_json(fields: prost_types::Struct) -> Result<Map<String, Value>, RequestError> {
    object_to_json(fields).map_err(|e| {
        let path: String = e.at.iter().rev().map(String::as_str).collect();
        RequestError::InvalidArguments(format!("arguments{path}: {}", e.why))
    })
}

/// Why a value has no JSON form: where (path segments, innermost first) and what.
struct NotJson {
    at: Vec<String>,
    why: String,
}

impl NotJson {
    /// The same fault, seen from one level up.
    fn under(mut self, segment: String) -> Self {
        self.at.push(segment);
        self
    }
}

fn object_to_json(fields: prost_types::Struct) -> Result<Map<String, Value>, NotJson> {
    fields
        .fields
        .into_iter()
        .map(|(name, value)| match value_to_json(value) {
            Ok(json) => Ok((name, json)),
            Err(e) => Err(e.under(format!(".{name}"))),
        })
        .collect()
}

fn value_to_json(value: prost_types::Value) -> Result<Value, NotJson> {
    use prost_types::value::Kind as V;
    Ok(match value.kind {
        None | Some(V::NullValue(_)) => Value::Null,
        Some(V::BoolValue(b)) => Value::Bool(b),
        Some(V::StringValue(s)) => Value::String(s),
        Some(V::NumberValue(n)) => Value::Number(Number::from_f64(n).ok_or_else(|| NotJson {
            at: Vec::new(),
            why: format!("{n} is not a JSON number"),
        })?),
        Some(V::ListValue(list)) => Value::Array(
            list.values
                .into_iter()
                .enumerate()
                .map(|(i, v)| value_to_json(v).map_err(|e| e.under(format!("[{i}]"))))
                .collect::<Result<_, _>>()?,
        ),
        Some(V::StructValue(fields)) => Value::Object(object_to_json(fields)?),
    })
}

/// A JSON object as a `google.protobuf.Struct`: what a client does when it sends
/// `CallToolRequest.arguments` built from JSON (protobuf's JSON mapping, as grpcurl applies
/// it). Every number becomes a double, so integers beyond 2^53 lose precision (that is what
/// `arguments_json` is for), and fields are kept in name order, not the object's. Up to
/// those, [`struct_to_json`] is its inverse.
pub fn json_to_struct(object: &Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: object
            .iter()
            .map(|(name, value)| (name.clone(), json_to_value(value)))
            .collect(),
    }
}

fn json_to_value(value: &Value) -> prost_types::Value {
    use prost_types::value::Kind as V;
    let kind = match value {
        Value::Null => V::NullValue(prost_types::NullValue::NullValue.into()),
        Value::Bool(b) => V::BoolValue(*b),
        // Without serde_json's arbitrary precision every number has an f64 form.
        Value::Number(n) => V::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => V::StringValue(s.clone()),
        Value::Array(items) => V::ListValue(prost_types::ListValue {
            values: items.iter().map(json_to_value).collect(),
        }),
        Value::Object(fields) => V::StructValue(json_to_struct(fields)),
    };
    prost_types::Value { kind: Some(kind) }
}

#[cfg(test)]
mod tests;
