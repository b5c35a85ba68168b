//! The catalog's shape as written: a server's `tools` entries (plain names, or overrides with
//! `as`, `description` and fixed `arguments`) and the top-level `views`. Pure.

use std::{collections::BTreeMap, sync::Arc};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    Auth, MAX_PREFIX_LEN, path,
    raw::suggest,
    validate::{Checker, kind},
};
use crate::domain::{
    names::{MAX_EXPOSED_LEN, is_name_char},
    overrides::ToolRule,
};

/// A `tools` entry written as a mapping.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolEntry {
    name: Option<String>,
    #[serde(rename = "as")]
    rename: Option<String>,
    description: Option<String>,
    arguments: Option<Map<String, Value>>,
}

/// The longest view name: it is a URL path segment of the MCP face.
const MAX_VIEW_NAME_LEN: usize = 64;

impl Checker<'_, '_> {
    /// A server's `tools` list: each entry a name or a mapping; every original name and every
    /// exposed name once.
    pub(super) fn tools(
        &mut self,
        raw: Option<Vec<Value>>,
        prefix: &str,
        at: &str,
    ) -> Vec<ToolRule> {
        let tools_at = path::field(at, "tools");
        let mut rules: Vec<ToolRule> = Vec::new();
        for (i, value) in raw.unwrap_or_default().into_iter().enumerate() {
            let entry_at = path::index(&tools_at, i);
            let Some(rule) = self.tool_entry(value, &entry_at) else {
                continue;
            };
            if let Some(first) = rules.iter().position(|r| r.name == rule.name) {
                let reason = format!(
                    "tool {:?} is listed twice (first at {tools_at}[{first}])",
                    rule.name
                );
                self.error(&entry_at, reason);
            } else if let Some(first) = rules
                .iter()
                .position(|r| r.exposed_suffix() == rule.exposed_suffix())
            {
                let reason = format!(
                    "two tools would be exposed as {:?} (the other at {tools_at}[{first}])",
                    format!("{prefix}{}", rule.exposed_suffix())
                );
                self.error(&entry_at, reason);
            }
            rules.push(rule);
        }
        rules
    }

    fn tool_entry(&mut self, value: Value, at: &str) -> Option<ToolRule> {
        match value {
            Value::String(name) if name.is_empty() => {
                self.error(at, "tool name must not be empty");
                None
            }
            Value::String(name) => Some(ToolRule::plain(name)),
            Value::Object(_) => {
                let raw = self.section::<RawToolEntry>(Some(value), at)?;
                let Some(name) = raw.name.filter(|name| !name.is_empty()) else {
                    self.error(at, "missing field \"name\" (the tool's name on its server)");
                    return None;
                };
                let rename = raw.rename.filter(|rename| self.rename_ok(rename, at));
                let arguments = self.fixed_arguments(raw.arguments, at);
                Some(ToolRule {
                    name,
                    rename,
                    description: raw.description,
                    arguments: Arc::new(arguments),
                })
            }
            other => {
                let reason = format!(
                    "expected a tool name or a mapping with \"name\", found {}",
                    kind(&other)
                );
                self.error(at, reason);
                None
            }
        }
    }

    /// `as` must already be a valid exposed name: a silent fix would surprise its author.
    fn rename_ok(&mut self, rename: &str, at: &str) -> bool {
        let as_at = path::field(at, "as");
        let longest = MAX_EXPOSED_LEN - MAX_PREFIX_LEN;
        let reason = if rename.is_empty() {
            "must not be empty".to_owned()
        } else if let Some(bad) = rename.chars().find(|c| !is_name_char(*c)) {
            format!("{rename:?} contains {bad:?}; use only letters, digits, '_' and '-'")
        } else if rename.len() > longest {
            format!("{rename:?} is longer than {longest} characters")
        } else {
            return true;
        };
        self.error(&as_at, reason);
        false
    }

    /// Fixed arguments: `${VAR}` expanded in string values, so a secret need not be written.
    fn fixed_arguments(&mut self, raw: Option<Map<String, Value>>, at: &str) -> Map<String, Value> {
        let mut arguments = raw.unwrap_or_default();
        for (name, value) in arguments.iter_mut() {
            if let Value::String(text) = value {
                let value_at = path::field(&path::field(at, "arguments"), name);
                match self.expand(text, &value_at) {
                    Some(expanded) => *text = expanded,
                    None => continue,
                }
            }
        }
        arguments
    }

    /// Every token's `view` names a view of the `views` section (`written`: every name there,
    /// valid or not, so that a view with a mistake of its own is not reported twice).
    pub(super) fn token_views(&mut self, auth: &Auth, written: &[String]) {
        for (i, token) in auth.tokens.iter().enumerate() {
            let Some(view) = token
                .view
                .as_deref()
                .filter(|v| !written.iter().any(|w| w == v))
            else {
                continue;
            };
            let known: Vec<&str> = written.iter().map(String::as_str).collect();
            let reason = if known.is_empty() {
                format!("no view {view:?}: the config defines no \"views\"")
            } else {
                format!("no view {view:?} in \"views\"; {}", suggest(view, &known))
            };
            self.error(&format!("auth.tokens[{i}].view"), reason);
        }
    }

    /// The `views` section: view name → exposed-name patterns (`*` and `?`); and every
    /// name written there.
    pub(super) fn views(
        &mut self,
        raw: Option<Value>,
    ) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
        let mut views = BTreeMap::new();
        let map = match raw {
            None | Some(Value::Null) => return (views, Vec::new()),
            Some(Value::Object(map)) => map,
            Some(other) => {
                let reason = format!(
                    "expected a mapping of view names to lists of tool patterns, found {}",
                    kind(&other)
                );
                self.error("views", reason);
                return (views, Vec::new());
            }
        };
        let written: Vec<String> = map.keys().cloned().collect();
        for (name, patterns) in map {
            let at = path::field("views", &name);
            if let Some(bad) = name.chars().find(|c| !is_name_char(*c)) {
                let reason = format!(
                    "view name {name:?} contains {bad:?}; use only letters, digits, '_' and '-' \
                     (it is a URL path segment of the MCP face)"
                );
                self.error(&at, reason);
                continue;
            }
            if name.len() > MAX_VIEW_NAME_LEN {
                self.error(
                    &at,
                    format!("view name is longer than {MAX_VIEW_NAME_LEN} characters"),
                );
                continue;
            }
            let before = self.errors.len();
            let patterns = match patterns {
                Value::Array(items) => items
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, item)| match item {
                        Value::String(pattern) if !pattern.is_empty() => Some(pattern),
                        other => {
                            let reason = format!(
                                "expected a non-empty tool pattern such as \"fs_*\", found {}",
                                kind(&other)
                            );
                            self.error(&path::index(&at, i), reason);
                            None
                        }
                    })
                    .collect::<Vec<_>>(),
                other => {
                    let reason =
                        format!("expected a list of tool patterns, found {}", kind(&other));
                    self.error(&at, reason);
                    continue;
                }
            };
            if self.errors.len() > before {
                continue;
            }
            if patterns.is_empty() {
                self.error(&at, "a view needs at least one tool pattern");
                continue;
            }
            views.insert(name, patterns);
        }
        (views, written)
    }
}
