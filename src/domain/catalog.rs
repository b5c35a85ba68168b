//! The catalog: every server's condition and tools, the exposed tool set and its revision.
//! Pure: updates come in as values, and what changed comes out as events with revisions.
//!
//! Only READY servers contribute tools. Servers are kept in configuration order, which is
//! also the order of precedence when two servers expose the same name: the first one wins,
//! whatever order they connected in, so the outcome never depends on a start-up race.

use std::{collections::BTreeMap, sync::Arc};

use super::{
    names::{ExposedName, ServerName},
    state::{ServerCondition, ServerState},
    tool::{ExposedTool, ToolSpec},
};

/// How many notes a status message shows before it says "and N more".
const MAX_NOTES_IN_MESSAGE: usize = 3;

/// What the configuration says about a server's tools.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerPolicy {
    /// The configured name.
    pub name: ServerName,
    /// Put before every original tool name.
    pub prefix: String,
    /// Original names to expose; empty means all.
    pub allow: Vec<String>,
}

/// A server as readers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerView {
    /// The configured name.
    pub name: ServerName,
    /// What the supervisor reported.
    pub condition: ServerCondition,
    /// The condition's message plus notes about skipped tools.
    pub message: String,
    /// How many of its tools are exposed.
    pub tool_count: u32,
}

/// A fact reported to the catalog.
#[derive(Debug, Clone)]
pub enum Update {
    /// A server's session changed state.
    Condition(ServerName, ServerCondition),
    /// A server's complete tool list as it offers it now.
    Tools(ServerName, Vec<ToolSpec>),
}

/// One server's tool changes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolsChange {
    /// Tools that appeared.
    pub added: Vec<Arc<ExposedTool>>,
    /// Tools whose definition changed.
    pub updated: Vec<Arc<ExposedTool>>,
    /// Exposed names that disappeared.
    pub removed: Vec<ExposedName>,
}

/// What changed.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A server's tools changed.
    Tools(ServerName, ToolsChange),
    /// A server's view changed.
    Server(ServerView),
}

/// A change with the revision the catalog reached by it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Catalog revision after this change.
    pub revision: u64,
    /// The change.
    pub change: Change,
}

impl Event {
    /// The server this event is about.
    pub fn server(&self) -> &ServerName {
        match &self.change {
            Change::Tools(server, _) => server,
            Change::Server(view) => &view.name,
        }
    }
}

/// The result of applying an update.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Events in order, with increasing revisions.
    pub events: Vec<Event>,
    /// New warnings to log (renamed or skipped tools), per server.
    pub warnings: Vec<(ServerName, String)>,
}

#[derive(Debug, Clone)]
struct Entry {
    policy: ServerPolicy,
    condition: ServerCondition,
    offered: Vec<Arc<ToolSpec>>,
    view: ServerView,
    warnings: Vec<String>,
}

/// Every server and the exposed tool set. Clone is cheap: readers get snapshots.
#[derive(Debug, Clone)]
pub struct Catalog {
    revision: u64,
    servers: Vec<Entry>,
    tools: Arc<BTreeMap<ExposedName, Arc<ExposedTool>>>,
}

impl Catalog {
    /// A catalog of `servers` (in configuration order), each in its initial condition.
    pub fn new(servers: Vec<(ServerPolicy, ServerCondition)>) -> Self {
        let servers = servers
            .into_iter()
            .map(|(policy, condition)| Entry {
                view: ServerView {
                    name: policy.name.clone(),
                    message: condition.message.clone(),
                    condition: condition.clone(),
                    tool_count: 0,
                },
                policy,
                condition,
                offered: Vec::new(),
                warnings: Vec::new(),
            })
            .collect();
        Self {
            revision: 0,
            servers,
            tools: Arc::default(),
        }
    }

    /// The revision: it grows by one with every event.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The exposed tools, sorted by name.
    pub fn tools(&self) -> &BTreeMap<ExposedName, Arc<ExposedTool>> {
        &self.tools
    }

    /// Looks up an exposed tool.
    pub fn tool(&self, name: &str) -> Option<&Arc<ExposedTool>> {
        self.tools.get(name)
    }

    /// The server that offered a tool exposed as `name` while it was READY but is not READY
    /// now, so that a call can say "unavailable" rather than "unknown".
    pub fn unready_owner(&self, name: &str) -> Option<&ServerView> {
        self.servers
            .iter()
            .filter(|entry| entry.condition.state != ServerState::Ready)
            .find(|entry| {
                entry.offered.iter().any(|spec| {
                    ExposedName::derive(&entry.policy.prefix, &spec.original)
                        .0
                        .as_str()
                        == name
                })
            })
            .map(|entry| &entry.view)
    }

    /// Every server, in configuration order.
    pub fn servers(&self) -> impl Iterator<Item = &ServerView> {
        self.servers.iter().map(|entry| &entry.view)
    }

    /// One server's view.
    pub fn server(&self, name: &str) -> Option<&ServerView> {
        self.servers().find(|view| view.name.as_str() == name)
    }

    /// Applies a fact and returns what changed. Updates for unknown servers change nothing.
    pub fn apply(&mut self, update: Update) -> Outcome {
        let (Update::Condition(name, _) | Update::Tools(name, _)) = &update;
        let Some(entry) = self.servers.iter_mut().find(|e| &e.policy.name == name) else {
            return Outcome::default();
        };
        match update {
            Update::Condition(_, condition) => entry.condition = condition,
            Update::Tools(_, tools) => entry.offered = tools.into_iter().map(Arc::new).collect(),
        }
        self.rebuild()
    }

    /// Recomputes the exposed set and every view, and turns the differences into events.
    fn rebuild(&mut self) -> Outcome {
        let exposure = expose(&self.servers);
        let mut outcome = Outcome::default();
        for (server, change) in diff(&self.servers, &self.tools, &exposure.tools) {
            outcome
                .events
                .push(self.event(Change::Tools(server, change)));
        }
        self.tools = Arc::new(exposure.tools);
        for (index, notes) in exposure.notes.into_iter().enumerate() {
            let entry = &mut self.servers[index];
            for warning in &notes.warnings {
                if !entry.warnings.contains(warning) {
                    outcome
                        .warnings
                        .push((entry.policy.name.clone(), warning.clone()));
                }
            }
            let view = ServerView {
                name: entry.policy.name.clone(),
                condition: entry.condition.clone(),
                message: compose_message(&entry.condition.message, &notes.status),
                tool_count: notes.tool_count,
            };
            entry.warnings = notes.warnings;
            if view != entry.view {
                entry.view = view.clone();
                outcome.events.push(Event {
                    revision: self.next_revision(),
                    change: Change::Server(view),
                });
            }
        }
        outcome
    }

    fn event(&mut self, change: Change) -> Event {
        Event {
            revision: self.next_revision(),
            change,
        }
    }

    fn next_revision(&mut self) -> u64 {
        self.revision += 1;
        self.revision
    }
}

/// Notes about one server's tools.
#[derive(Debug, Default)]
struct Notes {
    /// Shown in its status message: skipped tools, allow-list entries it does not offer.
    status: Vec<String>,
    /// Logged once: everything in `status` plus renamed tools.
    warnings: Vec<String>,
    tool_count: u32,
}

struct Exposure {
    tools: BTreeMap<ExposedName, Arc<ExposedTool>>,
    notes: Vec<Notes>,
}

/// The exposed set: the allowed tools of READY servers, first server first.
fn expose(servers: &[Entry]) -> Exposure {
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
    let allowed = |spec: &ToolSpec| {
        policy.allow.is_empty() || policy.allow.iter().any(|a| a == spec.original.as_str())
    };
    for spec in entry.offered.iter().filter(|spec| allowed(spec)) {
        let (name, renamed) = ExposedName::derive(&policy.prefix, &spec.original);
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
        let tool = ExposedTool {
            name: name.clone(),
            server: policy.name.clone(),
            spec: spec.clone(),
        };
        tools.insert(name, Arc::new(tool));
        notes.tool_count += 1;
    }
    for wanted in &policy.allow {
        if !entry.offered.iter().any(|s| s.original.as_str() == wanted) {
            let note = format!("allow-listed tool {wanted:?} is not offered by the server");
            notes.status.push(note.clone());
            notes.warnings.push(note);
        }
    }
}

/// Per-server differences between two exposed sets, in configuration order.
fn diff(
    servers: &[Entry],
    old: &BTreeMap<ExposedName, Arc<ExposedTool>>,
    new: &BTreeMap<ExposedName, Arc<ExposedTool>>,
) -> Vec<(ServerName, ToolsChange)> {
    let mut changes: Vec<(ServerName, ToolsChange)> = servers
        .iter()
        .map(|e| (e.policy.name.clone(), ToolsChange::default()))
        .collect();
    for (name, before) in old {
        match new.get(name) {
            Some(after) if after.server == before.server => {
                if after.spec != before.spec {
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

fn compose_message(base: &str, notes: &[String]) -> String {
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

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
