//! Schema conversion: turns a tool's input JSON Schema (an MCP `inputSchema`) into the
//! [`Param`] tree that LLM function-calling descriptions use.
//!
//! It owns the resolution rules: `type` forms, `properties`/`required`, `items`/`prefixItems`,
//! `enum`/`const`, `default`, local `$ref` pointers, `allOf`, `anyOf`/`oneOf` and `nullable`.
//! Pure: no I/O, environment, clock or logging; any input, however malformed, gives a result.

use serde_json::{Map, Value};

/// How deep conversion descends (properties, items, members, refs) before it stops nesting.
pub const MAX_DEPTH: usize = 32;

/// How many schema nodes one conversion expands before it stops nesting, so that refs which
/// fan out (a DAG, not a cycle) cannot blow up exponentially.
pub const MAX_NODES: usize = 10_000;

type Schema = Map<String, Value>;

/// One parameter of a tool, converted from JSON Schema.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Param {
    /// Property name; empty for array items.
    pub name: String,
    /// JSON Schema type name, or several joined by `|` (e.g. `string|null`); empty if unconstrained.
    pub r#type: String,
    /// The description (or the title when there is no description).
    pub description: String,
    /// Whether the enclosing object lists this property as required.
    pub required: bool,
    /// Allowed values: strings as they are, other values as JSON text (`1`, `true`, `null`).
    pub enum_values: Vec<String>,
    /// For arrays: the item schema.
    pub items: Option<Box<Param>>,
    /// For objects: the properties, in schema order.
    pub properties: Vec<Param>,
    /// The default as JSON text; empty when there is none.
    pub default_json: String,
}

/// The parameters of a tool: the properties of its input schema (an object schema).
pub fn params_from_schema(schema: &serde_json::Map<String, serde_json::Value>) -> Vec<Param> {
    let mut converter = Converter {
        root: schema,
        // The root is on the ref path from the start, so `{"$ref": "#"}` is seen as recursive.
        path: vec![schema],
        nodes: 0,
    };
    converter.object("", schema, 0).properties
}

/// One conversion's state: the root refs resolve against and the guards against recursion.
struct Converter<'a> {
    root: &'a Schema,
    /// The ref targets on the current path, compared by address.
    path: Vec<&'a Schema>,
    nodes: usize,
}

impl<'a> Converter<'a> {
    /// Converts any schema value; booleans and garbage become an unconstrained param.
    fn value(&mut self, name: &str, schema: &'a Value, depth: usize) -> Param {
        match schema {
            Value::Object(m) => self.object(name, m, depth),
            _ => Param {
                name: name.to_owned(),
                ..Param::default()
            },
        }
    }

    /// Converts an object schema: its own keywords first, so they win over what refs and
    /// combinators bring in.
    fn object(&mut self, name: &str, m: &'a Schema, depth: usize) -> Param {
        self.nodes += 1;
        let mut p = keywords(name, m);
        if depth < MAX_DEPTH && self.nodes <= MAX_NODES {
            self.expand(&mut p, m, depth + 1);
        }
        finish(&mut p, m);
        p
    }

    /// Adds the nested parts of `m` to `p`: properties, items, `$ref`, `allOf`, unions.
    fn expand(&mut self, p: &mut Param, m: &'a Schema, depth: usize) {
        if let Some(Value::Object(props)) = m.get("properties") {
            p.properties = props.iter().map(|(k, v)| self.value(k, v, depth)).collect();
        }
        p.items = self.items(m, depth).map(Box::new);
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            let target = self.reference(r, depth);
            merge_into(p, target);
        }
        if let Some(all) = m.get("allOf").and_then(Value::as_array) {
            for member in all {
                let member = self.value("", member, depth);
                merge_into(p, member);
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(list) = m.get(key).and_then(Value::as_array) {
                let members = list.iter().map(|s| self.value("", s, depth)).collect();
                merge_into(p, union(members));
            }
        }
    }

    /// The item schema: `items` (a schema, or a draft-4 tuple) and `prefixItems`, as a union
    /// when there are several, since a param has one item schema.
    fn items(&mut self, m: &'a Schema, depth: usize) -> Option<Param> {
        let mut members: Vec<&'a Value> = Vec::new();
        if let Some(Value::Array(prefix)) = m.get("prefixItems") {
            members.extend(prefix);
        }
        match m.get("items") {
            Some(Value::Array(tuple)) => members.extend(tuple),
            // `false` forbids further items: nothing to describe.
            None | Some(Value::Bool(false)) => {}
            Some(items) => members.push(items),
        }
        if members.is_empty() {
            return None;
        }
        let params = members
            .into_iter()
            .map(|v| self.value("", v, depth))
            .collect();
        Some(union(params))
    }

    /// The converted target of a local `$ref`; a target already on the ref path is not
    /// expanded again (only its declared type and description), so recursion ends.
    fn reference(&mut self, r: &str, depth: usize) -> Param {
        let Some(target) = self.resolve(r) else {
            // Remote or malformed refs cannot be resolved here: unconstrained.
            return Param::default();
        };
        if self.path.iter().any(|seen| std::ptr::eq(*seen, target)) {
            let mut p = keywords("", target);
            finish(&mut p, target);
            return p;
        }
        self.path.push(target);
        let p = self.object("", target, depth);
        self.path.pop();
        p
    }

    /// Resolves a local JSON pointer (`#`, `#/$defs/X`, with `~0`/`~1` escapes) on the root.
    fn resolve(&self, r: &str) -> Option<&'a Schema> {
        let pointer = r.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(self.root);
        }
        let path = pointer.strip_prefix('/')?;
        let first = path.split('/').next().unwrap_or(path);
        let rest = &path[first.len()..];
        let first = first.replace("~1", "/").replace("~0", "~");
        // The root is a map, not a value: step into it once, then `Value::pointer` does the rest.
        self.root.get(&first)?.pointer(rest)?.as_object()
    }
}

/// The param from `m`'s own, non-nesting keywords.
fn keywords(name: &str, m: &Schema) -> Param {
    let text = |key| m.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
    Param {
        name: name.to_owned(),
        r#type: type_names(m.get("type")),
        description: text("description")
            .or_else(|| text("title"))
            .unwrap_or_default()
            .to_owned(),
        enum_values: allowed_values(m).iter().map(|v| value_text(v)).collect(),
        default_json: m.get("default").map(Value::to_string).unwrap_or_default(),
        ..Param::default()
    }
}

/// What comes last, after merging: required flags, the inferred type and `nullable`.
fn finish(p: &mut Param, m: &Schema) {
    if let Some(required) = m.get("required").and_then(Value::as_array) {
        for prop in &mut p.properties {
            if required
                .iter()
                .any(|r| r.as_str() == Some(prop.name.as_str()))
            {
                prop.required = true;
            }
        }
    }
    if p.r#type.is_empty() {
        p.r#type = inferred_type(p, m);
    }
    if m.get("nullable") == Some(&Value::Bool(true)) {
        add_null(p);
    }
}

/// The type a schema without `type` evidently has: from its properties, items or values.
fn inferred_type(p: &Param, m: &Schema) -> String {
    if !p.properties.is_empty() || m.contains_key("properties") {
        return "object".to_owned();
    }
    if p.items.is_some() || m.contains_key("items") || m.contains_key("prefixItems") {
        return "array".to_owned();
    }
    join_types(allowed_values(m).iter().map(|v| value_kind(v)))
}

/// The `const` value, or else the `enum` values.
fn allowed_values(m: &Schema) -> Vec<&Value> {
    if let Some(c) = m.get("const") {
        return vec![c];
    }
    match m.get("enum") {
        Some(Value::Array(values)) => values.iter().collect(),
        _ => Vec::new(),
    }
}

/// A string as it is, anything else as compact JSON text.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The JSON Schema type name of a value.
fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The `type` keyword as text: a name, or several joined by `|`; anything else is empty.
fn type_names(t: Option<&Value>) -> String {
    match t {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(names)) => join_types(names.iter().filter_map(Value::as_str)),
        _ => String::new(),
    }
}

/// Joins type names (each possibly `a|b` already) with `|`, without repeats, in order.
fn join_types<'s>(types: impl IntoIterator<Item = &'s str>) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in types.into_iter().flat_map(|t| t.split('|')) {
        if !part.is_empty() && !parts.contains(&part) {
            parts.push(part);
        }
    }
    parts.join("|")
}

/// Makes `p` accept null too; an unconstrained param already does.
fn add_null(p: &mut Param) {
    if !p.r#type.is_empty() {
        p.r#type = join_types([p.r#type.as_str(), "null"]);
    }
}

/// Merges `other` into `acc` as `allOf` does: `acc` keeps what it has, gaps are filled from
/// `other`, properties are united (same names merged) and required if either says so.
fn merge_into(acc: &mut Param, other: Param) {
    fill(&mut acc.r#type, other.r#type);
    fill(&mut acc.description, other.description);
    fill(&mut acc.default_json, other.default_json);
    if acc.enum_values.is_empty() {
        acc.enum_values = other.enum_values;
    }
    acc.required |= other.required;
    if let Some(items) = other.items {
        match &mut acc.items {
            Some(mine) => merge_into(mine, *items),
            None => acc.items = Some(items),
        }
    }
    for prop in other.properties {
        match acc.properties.iter_mut().find(|p| p.name == prop.name) {
            Some(mine) => merge_into(mine, prop),
            None => acc.properties.push(prop),
        }
    }
}

/// Sets `slot` to `value` when `slot` is empty.
fn fill(slot: &mut String, value: String) {
    if slot.is_empty() {
        *slot = value;
    }
}

/// The union of `anyOf`/`oneOf` members. Null members only add `|null`, so a nullable
/// pattern keeps its one real member whole.
fn union(members: Vec<Param>) -> Param {
    let (nulls, mut rest): (Vec<Param>, Vec<Param>) =
        members.into_iter().partition(|p| p.r#type == "null");
    let mut p = match rest.len() {
        0 => nulls.first().cloned().unwrap_or_default(),
        1 => rest.pop().unwrap_or_default(),
        _ => join(rest),
    };
    if !nulls.is_empty() {
        add_null(&mut p);
    }
    p
}

/// Joins several non-null members: their types, their enums (when every member has one),
/// their items and their properties.
fn join(members: Vec<Param>) -> Param {
    let first_text = |f: fn(&Param) -> &String| {
        members
            .iter()
            .map(f)
            .find(|s| !s.is_empty())
            .cloned()
            .unwrap_or_default()
    };
    let mut p = Param {
        description: first_text(|m| &m.description),
        default_json: first_text(|m| &m.default_json),
        ..Param::default()
    };
    // An unconstrained member makes the union unconstrained.
    if members.iter().all(|m| !m.r#type.is_empty()) {
        p.r#type = join_types(members.iter().map(|m| m.r#type.as_str()));
    }
    // A member without an enum admits any value of its type, so the enums restrict nothing.
    if members.iter().all(|m| !m.enum_values.is_empty()) {
        for value in members.iter().flat_map(|m| &m.enum_values) {
            if !p.enum_values.contains(value) {
                p.enum_values.push(value.clone());
            }
        }
    }
    let count = members.len();
    let mut items = Vec::new();
    let mut groups: Vec<Vec<Param>> = Vec::new();
    for member in members {
        items.extend(member.items.map(|b| *b));
        for prop in member.properties {
            match groups
                .iter_mut()
                .find(|g| g.first().is_some_and(|q| q.name == prop.name))
            {
                Some(group) => group.push(prop),
                None => groups.push(vec![prop]),
            }
        }
    }
    p.items = (!items.is_empty()).then(|| Box::new(union(items)));
    p.properties = groups
        .into_iter()
        .map(|group| join_property(group, count))
        .collect();
    p
}

/// One property of a union of objects: required only when every member requires it.
fn join_property(group: Vec<Param>, count: usize) -> Param {
    let required = group.len() == count && group.iter().all(|p| p.required);
    let name = group.first().map(|q| q.name.clone()).unwrap_or_default();
    let mut p = union(group);
    p.name = name;
    p.required = required;
    p
}

#[cfg(test)]
mod tests;
