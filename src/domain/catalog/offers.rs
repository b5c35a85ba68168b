//! Which prompts and resources callers see: those of READY servers; prompts exposed as
//! prefix + original name, the first configured server winning a name. Pure.

use std::{collections::BTreeMap, sync::Arc};

use super::Entry;
use crate::domain::{
    names::ServerName,
    offer::{ExposedPrompt, Resources},
    state::ServerState,
};

/// The exposed prompts of READY servers, first server first.
pub(super) fn expose_prompts(servers: &[Entry]) -> BTreeMap<String, Arc<ExposedPrompt>> {
    let mut prompts = BTreeMap::new();
    for entry in servers
        .iter()
        .filter(|entry| entry.condition.state == ServerState::Ready)
    {
        for spec in &entry.prompts {
            let name = format!("{}{}", entry.policy.prefix, spec.original);
            prompts.entry(name.clone()).or_insert_with(|| {
                Arc::new(ExposedPrompt {
                    name,
                    server: entry.policy.name.clone(),
                    spec: spec.clone(),
                })
            });
        }
    }
    prompts
}

/// The servers (of `names`, in that order) whose exposed prompts differ between `old` and `new`.
pub(super) fn prompt_changes(
    names: &[ServerName],
    old: &BTreeMap<String, Arc<ExposedPrompt>>,
    new: &BTreeMap<String, Arc<ExposedPrompt>>,
) -> Vec<ServerName> {
    let of = |map: &BTreeMap<String, Arc<ExposedPrompt>>, server: &ServerName| {
        map.values()
            .filter(|prompt| &prompt.server == server)
            .cloned()
            .collect::<Vec<_>>()
    };
    names
        .iter()
        .filter(|server| of(old, server) != of(new, server))
        .cloned()
        .collect()
}

/// Records the resources callers now see of `entry` (none unless READY); its name if that
/// differs from what they were last told.
pub(super) fn show_resources(entry: &mut Entry) -> Option<ServerName> {
    let visible = if entry.condition.state == ServerState::Ready {
        entry.resources.clone()
    } else {
        Arc::new(Resources::default())
    };
    if visible == entry.shown_resources {
        return None;
    }
    entry.shown_resources = visible;
    Some(entry.policy.name.clone())
}
