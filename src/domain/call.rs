//! The rules of a tool call: its arguments and its timeout. Pure.

use std::time::Duration;

use serde_json::{Map, Number, Value};

use super::request_error::RequestError;

/// How deep a schema is followed when deciding which numbers are integers.
const MAX_SCHEMA_DEPTH: usize = 32;

/// The arguments of a call as the caller gave them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawArguments {
    /// From the `arguments` Struct, already turned into JSON (numbers are floats there).
    pub structured: Option<Map<String, Value>>,
    /// The `arguments_json` text; empty when not given.
    pub json: String,
}

/// The JSON object to send as the call's arguments. Struct numbers that are whole become
/// integers unless the schema says the value is a (non-integer) `number` there.
pub fn prepare_arguments(
    raw: RawArguments,
    schema: &Value,
) -> Result<Map<String, Value>, RequestError> {
    let invalid = |reason: String| Err(RequestError::InvalidArguments(reason));
    match (raw.structured, raw.json.trim()) {
        (Some(_), json) if !json.is_empty() => {
            invalid("give arguments or arguments_json, not both".into())
        }
        (Some(mut args), _) => {
            for (name, value) in &mut args {
                let at = property_schema(schema, schema, name, 0);
                integers_where_due(value, schema, at, 0);
            }
            Ok(args)
        }
        (None, "") => Ok(Map::new()),
        (None, json) => match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(args)) => Ok(args),
            Ok(other) => invalid(format!(
                "arguments_json must be a JSON object, not {}",
                kind(&other)
            )),
            Err(e) => invalid(format!("arguments_json is not valid JSON: {e}")),
        },
    }
}

/// The timeout of one call: the caller's wish, capped by the server's timeout and the
/// caller's deadline.
pub fn effective_timeout(
    requested: Option<Duration>,
    server: Duration,
    deadline: Option<Duration>,
) -> Result<Duration, RequestError> {
    if requested.is_some_and(|t| t.is_zero()) {
        return Err(RequestError::InvalidArguments(
            "timeout must be positive; leave it unset to use the server's timeout".into(),
        ));
    }
    Ok([requested, Some(server), deadline]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(server))
}

/// How long a call may wait for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The call's timeout; for a streaming call, each progress notification restarts it.
    pub timeout: Duration,
    /// The most a streaming call may last, however often it is restarted.
    pub max: Duration,
}

impl Timing {
    /// A unary call's: its timeout is all there is.
    pub fn unary(timeout: Duration) -> Self {
        Self {
            timeout,
            max: timeout,
        }
    }

    /// A streaming call's: the caller's timeout (capped by the server's and the deadline),
    /// restarted by progress up to the server's `max_timeout` or the deadline, whichever is
    /// first.
    pub fn streaming(
        requested: Option<Duration>,
        server: Duration,
        server_max: Duration,
        deadline: Option<Duration>,
    ) -> Result<Self, RequestError> {
        let timeout = effective_timeout(requested, server, deadline)?;
        let max = deadline.map_or(server_max, |d| d.min(server_max));
        Ok(Self {
            timeout,
            max: max.max(timeout),
        })
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Rewrites whole floats as integers, except where `schema` says the value is a `number`.
fn integers_where_due(value: &mut Value, root: &Value, schema: Option<&Value>, depth: usize) {
    let schema = schema.map(|s| resolve(root, s, depth));
    match value {
        Value::Number(n) if !says_plain_number(schema) => {
            if let Some(int) = whole(n) {
                *n = int;
            }
        }
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.get("items"));
            for item in items {
                integers_where_due(item, root, item_schema, depth + 1);
            }
        }
        Value::Object(map) => {
            for (name, item) in map {
                let at = schema.and_then(|s| property_schema(root, s, name, depth));
                integers_where_due(item, root, at, depth + 1);
            }
        }
        _ => {}
    }
}

/// The schema of property `name` in an object schema, looking through `$ref` and unions.
fn property_schema<'a>(
    root: &'a Value,
    schema: &'a Value,
    name: &str,
    depth: usize,
) -> Option<&'a Value> {
    if depth > MAX_SCHEMA_DEPTH {
        return None;
    }
    let schema = resolve(root, schema, depth);
    if let Some(found) = schema.get("properties").and_then(|p| p.get(name)) {
        return Some(found);
    }
    ["anyOf", "oneOf", "allOf"]
        .iter()
        .filter_map(|key| schema.get(*key)?.as_array())
        .flatten()
        .find_map(|member| property_schema(root, member, name, depth + 1))
}

/// Follows local `$ref`s (`#/...` JSON pointers) to the schema they name.
fn resolve<'a>(root: &'a Value, mut schema: &'a Value, depth: usize) -> &'a Value {
    for _ in depth..MAX_SCHEMA_DEPTH {
        let Some(pointer) = schema.get("$ref").and_then(Value::as_str) else {
            break;
        };
        match pointer.strip_prefix('#').and_then(|p| root.pointer(p)) {
            Some(target) => schema = target,
            None => break,
        }
    }
    schema
}

/// Whether the schema allows `number` but not `integer` (anywhere in a union).
fn says_plain_number(schema: Option<&Value>) -> bool {
    let Some(schema) = schema else {
        return false;
    };
    let mut types = Vec::new();
    collect_types(schema, &mut types, 0);
    types.contains(&"number") && !types.contains(&"integer")
}

fn collect_types<'a>(schema: &'a Value, types: &mut Vec<&'a str>, depth: usize) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    match schema.get("type") {
        Some(Value::String(t)) => types.push(t),
        Some(Value::Array(list)) => types.extend(list.iter().filter_map(Value::as_str)),
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        for member in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            collect_types(member, types, depth + 1);
        }
    }
}

/// A float with no fractional part, within the range where floats are exact, as an integer.
fn whole(n: &Number) -> Option<Number> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    let f = n.as_f64().filter(|_| n.is_f64())?;
    (f.fract() == 0.0 && f.abs() <= EXACT).then(|| Number::from(f as i64))
}

#[cfg(test)]
mod tests;
