//! What users write: the YAML document as a JSON value, the raw serde structs, and the lenient
//! deserialization that collects every unknown key and type error instead of stopping. Pure.

use std::fmt;

use serde::{Deserialize, Deserializer, de::DeserializeOwned};
use serde_json::{Map, Value};

use super::{ConfigError, path};

/// The top level of the file, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTop {
    pub listen: Option<String>,
    pub metrics_listen: Option<String>,
    pub mcp_listen: Option<String>,
    /// The MCP face's settings, checked in `face.rs`.
    pub mcp_allowed_origins: Option<Value>,
    pub mcp_sessions_per_caller: Option<u64>,
    pub mcp_max_sessions: Option<u64>,
    pub unix_listen: Option<String>,
    pub readiness: Option<String>,
    /// Kept raw so that a bad duration is a semantic error with a helpful message.
    pub shutdown_grace: Option<Value>,
    pub max_connection_age: Option<Value>,
    pub max_connection_age_grace: Option<Value>,
    pub record_arguments: Option<bool>,
    /// Sections checked on their own (see `security.rs`), kept raw here.
    pub auth: Option<Value>,
    pub tls: Option<Value>,
    pub reflection: Option<bool>,
    pub limits: Option<Value>,
    pub audit: Option<Value>,
    /// Checked in `tasks.rs`.
    pub tasks: Option<Value>,
    /// Checked in `state.rs`.
    pub state: Option<Value>,
    /// Checked in `shaping.rs`.
    pub views: Option<Value>,
    /// A list of servers, or (as VS Code's mcp.json writes it) a map of name to server.
    pub servers: Option<Value>,
    #[serde(rename = "mcpServers")]
    pub mcp_servers: Option<Map<String, Value>>,
}

/// One server entry, as written in either form; which keys a form allows is [`ServerForm`]'s.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub name: Option<String>,
    pub transport: Option<String>,
    /// mcp.json's spelling of `transport`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub command: Option<String>,
    pub args: Option<Vec<Text>>,
    pub env: Option<Pairs>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    pub headers: Option<Pairs>,
    /// Names or override mappings, checked in `shaping.rs`.
    pub tools: Option<Vec<Value>>,
    pub prefix: Option<String>,
    /// Kept raw so that a bad duration is a semantic error with a helpful message.
    pub timeout: Option<Value>,
    pub max_timeout: Option<Value>,
    pub init_timeout: Option<Value>,
    pub backoff_initial: Option<Value>,
    pub backoff_max: Option<Value>,
    pub max_concurrent_calls: Option<u64>,
    pub max_queued_calls: Option<u64>,
    pub queue_timeout: Option<Value>,
    pub inherit_env: Option<bool>,
    pub replicas: Option<u64>,
    pub isolation: Option<String>,
    pub max_sessions: Option<u64>,
    pub max_sessions_per_caller: Option<u64>,
    /// Kept raw so that a bad duration is a semantic error with a helpful message.
    pub idle_timeout: Option<Value>,
    /// Sections checked on their own (see `isolation.rs`), kept raw here.
    pub discovery: Option<Value>,
    pub token_exchange: Option<Value>,
    pub oauth: Option<Value>,
    /// Kept raw so that a bad rate is a semantic error with a helpful message.
    pub rate: Option<Value>,
    pub caller_rate: Option<Value>,
    /// Answered to the server's `roots/list`.
    pub roots: Option<Vec<String>>,
}

/// The two ways of writing a server entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ServerForm {
    /// An item of the `servers` list, named by its `name` field.
    List,
    /// A value of the `mcpServers` map (or a `servers` map), named by its key.
    Map,
}

impl ServerForm {
    /// The keys this form allows: the list form has `name`, the map form has `type`.
    pub fn fields(self) -> Vec<&'static str> {
        let excluded = match self {
            ServerForm::List => "type",
            ServerForm::Map => "name",
        };
        serde_aux::serde_introspection::serde_introspect::<RawServer>()
            .iter()
            .copied()
            .filter(|f| *f != excluded)
            .collect()
    }

    /// A hint for a key that belongs to the other form.
    fn hint(self, key: &str) -> Option<&'static str> {
        match (self, key) {
            (ServerForm::List, "type") => Some("did you mean \"transport\"?"),
            (ServerForm::Map, "name") => Some("in a map of servers the key is the server's name"),
            _ => None,
        }
    }
}

/// A scalar taken as text: YAML users write `PORT: 8080` or `DEBUG: true` in env maps and args.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl serde::de::Visitor<'_> for TextVisitor {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                // Floats are refused: `1.10` would silently become "1.1".
                f.write_str("a string, an integer or a boolean (quote other values)")
            }
            fn visit_str<E>(self, v: &str) -> Result<Text, E> {
                Ok(Text(v.to_owned()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
        }
        deserializer.deserialize_any(TextVisitor)
    }
}

/// A map of text values in file order (env, headers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Pairs(pub Vec<(String, Text)>);

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PairsVisitor;
        impl<'de> serde::de::Visitor<'de> for PairsVisitor {
            type Value = Pairs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of names to values")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Pairs, A::Error> {
                let mut pairs = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Text>()? {
                    pairs.push((key, value));
                }
                Ok(Pairs(pairs))
            }
        }
        deserializer.deserialize_map(PairsVisitor)
    }
}

/// Parses the text as YAML (JSON is YAML) into a JSON value, applying `<<` merge keys.
///
/// A syntax error is one error naming the line and column; an empty document is `null`.
pub(super) fn load(text: &str) -> Result<Value, Vec<ConfigError>> {
    let mut yaml: yaml_serde::Value = yaml_serde::from_str(text)
        .map_err(|e| vec![ConfigError::new("", format!("invalid yaml: {e}"))])?;
    yaml.apply_merge().map_err(|e| {
        vec![ConfigError::new(
            "",
            format!("invalid yaml merge key (<<): {e}"),
        )]
    })?;
    let mut errors = Vec::new();
    let value = to_json(yaml, "", &mut errors);
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}

/// Converts a YAML value to JSON, reporting what JSON cannot hold (tags, non-scalar keys).
fn to_json(yaml: yaml_serde::Value, at: &str, errors: &mut Vec<ConfigError>) -> Value {
    use yaml_serde::Value as Y;
    match yaml {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => number(&n),
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| to_json(item, &path::index(at, i), errors))
                .collect(),
        ),
        Y::Mapping(mapping) => {
            let mut map = Map::with_capacity(mapping.len());
            for (key, value) in mapping {
                let Some(key) = key_text(&key) else {
                    errors.push(ConfigError::new(at, "mapping keys must be strings"));
                    continue;
                };
                let value = to_json(value, &path::field(at, &key), errors);
                map.insert(key, value);
            }
            Value::Object(map)
        }
        Y::Tagged(tagged) => {
            let reason = format!("yaml tag {} is not supported", tagged.tag);
            errors.push(ConfigError::new(at, reason));
            Value::Null
        }
    }
}

fn number(n: &yaml_serde::Number) -> Value {
    if let Some(u) = n.as_u64() {
        Value::from(u)
    } else if let Some(i) = n.as_i64() {
        Value::from(i)
    } else {
        // JSON has no NaN or infinity: they become null, like serde_json does.
        n.as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number)
    }
}

/// A mapping key as text: YAML allows `8080: x` or `true: x`, JSON only strings.
fn key_text(key: &yaml_serde::Value) -> Option<String> {
    match key {
        yaml_serde::Value::String(s) => Some(s.clone()),
        yaml_serde::Value::Number(n) => Some(n.to_string()),
        yaml_serde::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Removes the keys of `map` not in `allowed`, reporting each with a suggestion.
pub(super) fn remove_unknown_keys(
    map: &mut Map<String, Value>,
    allowed: &[&str],
    form: Option<ServerForm>,
    at: &str,
    errors: &mut Vec<ConfigError>,
) {
    let unknown: Vec<String> = map
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .cloned()
        .collect();
    for key in unknown {
        // shift_remove, not remove (a swap_remove): keeps file order for what follows.
        map.shift_remove(&key);
        let hint = match form.and_then(|f| f.hint(&key)) {
            Some(hint) => hint.to_owned(),
            None => suggest(&key, allowed),
        };
        errors.push(ConfigError::new(
            path::field(at, &key),
            format!("unknown field; {hint}"),
        ));
    }
}

/// "did you mean "x"?" for the closest of `candidates`, else the list of them.
pub(super) fn suggest(input: &str, candidates: &[&str]) -> String {
    match closest(input, candidates) {
        Some(best) => format!("did you mean {best:?}?"),
        None => format!("expected one of: {}", candidates.join(", ")),
    }
}

/// The candidate most like `input`, if any is close enough to be a likely typo.
fn closest<'a>(input: &str, candidates: &[&'a str]) -> Option<&'a str> {
    // 0.8 catches dropped, doubled and swapped letters ("comand", "timout") without pairing
    // unrelated short words.
    const THRESHOLD: f64 = 0.8;
    let input = input.to_lowercase();
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(&input, &c.to_lowercase()), *c))
        .filter(|(score, _)| *score >= THRESHOLD)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// Deserializes `map` into `T`, reporting every type error: on each error the offending key
/// is reported and dropped, and the rest is tried again (all fields of `T` are optional).
/// Returns the value and the keys dropped.
pub(super) fn deserialize_all<T: DeserializeOwned + Default>(
    mut map: Map<String, Value>,
    at: &str,
    errors: &mut Vec<ConfigError>,
) -> (T, Vec<String>) {
    let mut dropped = Vec::new();
    // Each round removes one key, so this ends after at most `map.len() + 1` rounds.
    loop {
        let error = match serde_path_to_error::deserialize(Value::Object(map.clone())) {
            Ok(value) => return (value, dropped),
            Err(error) => error,
        };
        let inner = error.path().to_string();
        let inner = if inner == "." { "" } else { inner.as_str() };
        errors.push(ConfigError::new(
            path::join(at, inner),
            error.inner().to_string(),
        ));
        let key = match error.path().iter().next() {
            Some(serde_path_to_error::Segment::Map { key }) => key.clone(),
            _ => return (T::default(), dropped),
        };
        if map.shift_remove(&key).is_none() {
            return (T::default(), dropped);
        }
        dropped.push(key);
    }
}
