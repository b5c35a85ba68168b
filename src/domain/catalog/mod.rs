//! The catalog: every server's condition, tools, resources and prompts, the exposed tool and
//! prompt sets and its revision.
//! Pure: updates come in as values, and what changed comes out as events with revisions.
//!
//! Only READY servers contribute tools. Servers are kept in configuration order, which is
//! also the order of precedence when two servers expose the same name: the first one wins,
//! whatever order they connected in, so the outcome never depends on a start-up race.

use std::{borrow::Cow, collections::BTreeMap, sync::Arc};

mod exposure;
mod offers;

use self::exposure::{compose_message, diff, expose};
use super::{
    names::{ExposedName, ServerName},
    offer::{ExposedPrompt, PromptSpec, Resources},
    overrides::ToolRule,
    redact,
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
    /// The tools to expose and how each is reshaped; empty means all, as declared.
    pub tools: Vec<ToolRule>,
}

impl ServerPolicy {
    /// The rule for a tool its server offers: its entry, a plain one when every tool is
    /// exposed, or `None` when the tool is not listed.
    pub fn rule(&self, original: &str) -> Option<Cow<'_, ToolRule>> {
        if self.tools.is_empty() {
            return Some(Cow::Owned(ToolRule::plain(original)));
        }
        self.tools
            .iter()
            .find(|rule| rule.name == original)
            .map(Cow::Borrowed)
    }

    /// The name the tool `original` is exposed under, and whether it had to be made valid.
    pub fn exposed_name(&self, rule: &ToolRule) -> (ExposedName, bool) {
        ExposedName::derive(&self.prefix, rule.exposed_suffix())
    }
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
    /// A server's complete resources and templates as it offers them now.
    Resources(ServerName, Resources),
    /// A server's complete prompts as it offers them now.
    Prompts(ServerName, Vec<PromptSpec>),
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
    /// The resources or templates callers see of a server changed.
    Resources(ServerName),
    /// The prompts callers see of a server changed.
    Prompts(ServerName),
    /// A reload redefined the views (what they are now is the broker's to say): a reader of
    /// a view reads its tools again.
    Views,
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
    /// The server this event is about, if it is about one.
    pub fn server(&self) -> Option<&ServerName> {
        match &self.change {
            Change::Tools(server, _) => Some(server),
            Change::Server(view) => Some(&view.name),
            Change::Resources(server) | Change::Prompts(server) => Some(server),
            Change::Views => None,
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
    /// For each offered tool, as callers see it when its rule reshapes it: derived when the
    /// tools or the policy change, not at every rebuild, so that its compiled validator lasts.
    reshaped: Vec<Option<Arc<ToolSpec>>>,
    view: ServerView,
    warnings: Vec<String>,
    /// Its resources and templates, as last listed.
    resources: Arc<Resources>,
    /// Its resources as callers were last told of them (none while it is not READY).
    shown_resources: Arc<Resources>,
    /// Its prompts, as last listed.
    prompts: Vec<Arc<PromptSpec>>,
    /// Added by a reconfiguration and not yet announced with a status event.
    fresh: bool,
}

impl Entry {
    /// Derives `reshaped` from the offered tools and the policy's rules.
    fn reshape(&mut self) {
        self.reshaped = self
            .offered
            .iter()
            .map(|spec| {
                let rule = self.policy.rule(spec.original.as_str())?;
                rule.reshapes().then(|| Arc::new(rule.reshape(spec)))
            })
            .collect();
    }

    fn new(policy: ServerPolicy, condition: ServerCondition) -> Self {
        Entry {
            view: ServerView {
                name: policy.name.clone(),
                message: redact::urls(&condition.message).into_owned(),
                condition: condition.clone(),
                tool_count: 0,
            },
            policy,
            condition,
            offered: Vec::new(),
            reshaped: Vec::new(),
            warnings: Vec::new(),
            resources: Arc::default(),
            shown_resources: Arc::default(),
            prompts: Vec::new(),
            fresh: false,
        }
    }
}

/// Every server and the exposed tool set. Clone is cheap: readers get snapshots.
#[derive(Debug, Clone)]
pub struct Catalog {
    revision: u64,
    servers: Vec<Entry>,
    tools: Arc<BTreeMap<ExposedName, Arc<ExposedTool>>>,
    /// The exposed prompts of READY servers, by exposed name.
    prompts: Arc<BTreeMap<String, Arc<ExposedPrompt>>>,
}

impl Catalog {
    /// A catalog of `servers` (in configuration order), each in its initial condition.
    pub fn new(servers: Vec<(ServerPolicy, ServerCondition)>) -> Self {
        let servers = servers
            .into_iter()
            .map(|(policy, condition)| Entry::new(policy, condition))
            .collect();
        Self {
            revision: 0,
            servers,
            tools: Arc::default(),
            prompts: Arc::default(),
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
                    entry
                        .policy
                        .rule(spec.original.as_str())
                        .is_some_and(|rule| entry.policy.exposed_name(&rule).0.as_str() == name)
                })
            })
            .map(|entry| &entry.view)
    }

    /// Whether server `name` offers, or offered while it was READY, a tool whose exposed name
    /// `wanted` accepts: what a restricted caller's view of the servers is made of.
    pub fn server_offers(&self, name: &str, wanted: impl Fn(&str) -> bool) -> bool {
        self.servers
            .iter()
            .filter(|entry| entry.policy.name.as_str() == name)
            .any(|entry| {
                entry.offered.iter().any(|spec| {
                    entry
                        .policy
                        .rule(spec.original.as_str())
                        .is_some_and(|rule| wanted(entry.policy.exposed_name(&rule).0.as_str()))
                })
            })
    }

    /// The exposed prompts of READY servers, sorted by exposed name.
    pub fn prompts(&self) -> &BTreeMap<String, Arc<ExposedPrompt>> {
        &self.prompts
    }

    /// Looks up an exposed prompt.
    pub fn prompt(&self, name: &str) -> Option<&Arc<ExposedPrompt>> {
        self.prompts.get(name)
    }

    /// The resources and templates of each READY server, in configuration order.
    pub fn resources(&self) -> impl Iterator<Item = (&ServerName, &Resources)> {
        self.servers
            .iter()
            .filter(|entry| entry.condition.state == ServerState::Ready)
            .map(|entry| (&entry.policy.name, &*entry.resources))
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
        let (Update::Condition(name, _)
        | Update::Tools(name, _)
        | Update::Resources(name, _)
        | Update::Prompts(name, _)) = &update;
        let Some(entry) = self.servers.iter_mut().find(|e| &e.policy.name == name) else {
            return Outcome::default();
        };
        match update {
            Update::Condition(_, condition) => entry.condition = condition,
            Update::Tools(_, tools) => {
                entry.offered = tools.into_iter().map(Arc::new).collect();
                entry.reshape();
            }
            Update::Resources(_, resources) => entry.resources = Arc::new(resources),
            Update::Prompts(_, prompts) => {
                entry.prompts = prompts.into_iter().map(Arc::new).collect();
            }
        }
        self.rebuild()
    }

    /// Takes a new list of servers (a reloaded configuration), in its order: servers already
    /// known keep their state and tools under their new policy, new ones start in the condition
    /// given, and missing ones are dropped after a last status event (STOPPED, `removed`).
    pub fn configure(&mut self, servers: Vec<(ServerPolicy, ServerCondition)>) -> Outcome {
        let mut old: Vec<Entry> = std::mem::take(&mut self.servers);
        for (policy, condition) in servers {
            let entry = match old.iter().position(|e| e.policy.name == policy.name) {
                Some(index) => {
                    let mut entry = old.remove(index);
                    if entry.policy != policy {
                        entry.policy = policy;
                        entry.reshape();
                    }
                    entry
                }
                None => Entry {
                    fresh: true,
                    ..Entry::new(policy, condition)
                },
            };
            self.servers.push(entry);
        }
        let removed: Vec<ServerView> = old.into_iter().map(|entry| entry.view).collect();
        self.rebuild_dropping(&removed)
    }

    /// Says that a reload redefined the views: one [`Change::Views`] event, in order with the
    /// others, so that readers of a view see its new tools as of a revision.
    pub fn views_changed(&mut self) -> Outcome {
        Outcome {
            events: vec![self.event(Change::Views)],
            warnings: Vec::new(),
        }
    }

    /// Recomputes the exposed set and every view, and turns the differences into events.
    fn rebuild(&mut self) -> Outcome {
        self.rebuild_dropping(&[])
    }

    /// [`Self::rebuild`], also announcing the servers in `removed` as gone.
    fn rebuild_dropping(&mut self, removed: &[ServerView]) -> Outcome {
        let exposure = expose(&self.servers);
        let mut outcome = Outcome::default();
        let names: Vec<ServerName> = self
            .servers
            .iter()
            .map(|e| e.policy.name.clone())
            .chain(removed.iter().map(|view| view.name.clone()))
            .collect();
        for (server, change) in diff(&names, &self.tools, &exposure.tools) {
            outcome
                .events
                .push(self.event(Change::Tools(server, change)));
        }
        for view in removed {
            let mut gone = view.clone();
            gone.condition.state = ServerState::Stopped;
            gone.message = "removed from the configuration".into();
            gone.tool_count = 0;
            outcome.events.push(self.event(Change::Server(gone)));
        }
        self.tools = Arc::new(exposure.tools);
        let prompts = offers::expose_prompts(&self.servers);
        for server in offers::prompt_changes(&names, &self.prompts, &prompts) {
            outcome.events.push(self.event(Change::Prompts(server)));
        }
        self.prompts = Arc::new(prompts);
        for index in 0..self.servers.len() {
            if let Some(server) = offers::show_resources(&mut self.servers[index]) {
                outcome.events.push(self.event(Change::Resources(server)));
            }
        }
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
                message: redact::urls(&compose_message(&entry.condition.message, &notes.status))
                    .into_owned(),
                tool_count: notes.tool_count,
            };
            entry.warnings = notes.warnings;
            if view != entry.view || entry.fresh {
                entry.fresh = false;
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

#[cfg(test)]
mod tests;
