//! Which tools each READY server exposes under which names (first configured server first),
//! how two exposed sets differ, and the notes that explain skipped tools. Pure.

use std::{collections::BTreeMap, sync::Arc};

use super::{Entry, MAX_NOTES_IN_MESSAGE, ToolsChange};
use crate::domain::{
    names::{ExposedName, ServerName},
    state::ServerState,
    tool::ExposedTool,
};

/// Notes about one server's tools.
#[derive(Debug, Default)]
pub(super) struct Notes {
    /// Shown in its status message: skipped tools, allow-list entries it does not offer.
    pub status: Vec<String>,
    /// Logged once: everything in `status` plus renamed tools.
    pub warnings: Vec<String>,
    /// How many of its tools are exposed.
    pub tool_count: u32,
}

/// The exposed set, and notes per server (in configuration order).
pub(super) struct Exposure {
    pub tools: BTreeMap<ExposedName, Arc<ExposedTool>>,
    pub notes: Vec<Notes>,
}

/// The exposed set: the allowed tools of READY servers, first server first.
pub(super) fn expose(servers: &[Entry]) -> Exposure {
    let mut tools: BTreeMap<ExposedName, Arc<ExposedTool>> = BTreeMap::new();
    let mut all_notes = Vec::with_capacity(servers.len());
    for entry in servers {
        let mut notes = Notes::default();
        if entry.condition.state == ServerState::Ready {
            expose_server(entry, &mut tools, &mut notes);
        }
        all_notes.push(notes);
    }
    Exposure {
        tools,
        notes: all_notes,
    }
}

fn expose_server(
    entry: &Entry,
    tools: &mut BTreeMap<ExposedName, Arc<ExposedTool>>,
    notes: &mut Notes,
) {
    let policy = &entry.policy;
    for (index, spec) in entry.offered.iter().enumerate() {
        let Some(rule) = policy.rule(spec.original.as_str()) else {
            continue;
        };
        let (name, renamed) = policy.exposed_name(&rule);
        if let Some(holder) = tools.get(&name) {
            let note = format!(
                "tool {:?} skipped: the name {name:?} is already exposed by server {:?}",
                spec.original.as_str(),
                holder.server.as_str()
            );
            notes.status.push(note.clone());
            notes.warnings.push(note);
            continue;
        }
        if renamed {
            notes.warnings.push(format!(
                "tool {:?} exposed as {name:?}: LLM APIs accept only letters, digits, '_' \
                 and '-', at most 64 characters",
                spec.original.as_str()
            ));
        }
        let undeclared = rule.undeclared_arguments(spec);
        if !undeclared.is_empty() {
            notes.warnings.push(format!(
                "tool {:?}: fixed argument(s) {undeclared:?} are not in its input schema; \
                 they are sent anyway",
                spec.original.as_str()
            ));
        }
        let spec = entry.reshaped[index]
            .clone()
            .unwrap_or_else(|| spec.clone());
        let tool = ExposedTool {
            name: name.clone(),
            server: policy.name.clone(),
            spec,
            fixed: rule.arguments.clone(),
        };
        tools.insert(name, Arc::new(tool));
        notes.tool_count += 1;
    }
    for wanted in &policy.tools {
        if !entry
            .offered
            .iter()
            .any(|s| s.original.as_str() == wanted.name)
        {
            let note = format!(
                "tool {:?} in the \"tools\" list is not offered by the server",
                wanted.name
            );
            notes.status.push(note.clone());
            notes.warnings.push(note);
        }
    }
}

/// Per-server differences between two exposed sets, in the order of `servers` (every server
/// that exposes a tool in either set).
pub(super) fn diff(
    servers: &[ServerName],
    old: &BTreeMap<ExposedName, Arc<ExposedTool>>,
    new: &BTreeMap<ExposedName, Arc<ExposedTool>>,
) -> Vec<(ServerName, ToolsChange)> {
    let mut changes: Vec<(ServerName, ToolsChange)> = servers
        .iter()
        .map(|name| (name.clone(), ToolsChange::default()))
        .collect();
    for (name, before) in old {
        match new.get(name) {
            Some(after) if after.server == before.server => {
                if after.spec != before.spec || after.fixed != before.fixed {
                    change_of(&mut changes, &after.server)
                        .updated
                        .push(after.clone());
                }
            }
            _ => change_of(&mut changes, &before.server)
                .removed
                .push(name.clone()),
        }
    }
    for (name, after) in new {
        if old
            .get(name)
            .is_none_or(|before| before.server != after.server)
        {
            change_of(&mut changes, &after.server)
                .added
                .push(after.clone());
        }
    }
    changes.retain(|(_, c)| !(c.added.is_empty() && c.updated.is_empty() && c.removed.is_empty()));
    changes
}

fn change_of<'a>(
    changes: &'a mut [(ServerName, ToolsChange)],
    server: &ServerName,
) -> &'a mut ToolsChange {
    let index = changes
        .iter()
        .position(|(name, _)| name == server)
        .expect("every exposed tool belongs to a configured server");
    &mut changes[index].1
}

pub(super) fn compose_message(base: &str, notes: &[String]) -> String {
    if notes.is_empty() {
        return base.to_owned();
    }
    let mut parts: Vec<&str> = Vec::with_capacity(MAX_NOTES_IN_MESSAGE + 1);
    if !base.is_empty() {
        parts.push(base);
    }
    parts.extend(notes.iter().take(MAX_NOTES_IN_MESSAGE).map(String::as_str));
    let more = notes.len().saturating_sub(MAX_NOTES_IN_MESSAGE);
    let more_note = format!("and {more} more (see the log)");
    if more > 0 {
        parts.push(&more_note);
    }
    parts.join("; ")
}
