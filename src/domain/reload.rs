//! What a reloaded configuration changes: which servers start, stop, restart, or stay as they
//! are. Pure.

use super::{config::ServerSpec, names::ServerName};

/// The servers a new configuration touches, by name.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Servers that are new.
    pub start: Vec<ServerName>,
    /// Servers that are gone.
    pub stop: Vec<ServerName>,
    /// Servers whose entry changed in any way: they get a fresh session.
    pub restart: Vec<ServerName>,
    /// Servers whose entry is the same, or differs only in its `tools` (what the catalog shows):
    /// their sessions and in-flight calls are untouched.
    pub keep: Vec<ServerName>,
}

/// Compares the running servers with the new configuration's.
pub fn plan(old: &[ServerSpec], new: &[ServerSpec]) -> Plan {
    let mut plan = Plan::default();
    for spec in new {
        match old.iter().find(|o| o.name == spec.name) {
            None => plan.start.push(spec.name.clone()),
            Some(before) if before.same_sessions(spec) => plan.keep.push(spec.name.clone()),
            Some(_) => plan.restart.push(spec.name.clone()),
        }
    }
    plan.stop = old
        .iter()
        .filter(|o| !new.iter().any(|n| n.name == o.name))
        .map(|o| o.name.clone())
        .collect();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::parse;

    fn servers(yaml: &str) -> Vec<ServerSpec> {
        parse(yaml, &|_| None).expect("valid test config").servers
    }

    fn names(names: &[ServerName]) -> Vec<&str> {
        names.iter().map(ServerName::as_str).collect()
    }

    #[test]
    fn each_server_is_started_stopped_restarted_or_kept() {
        let old = servers(
            "servers:\n- {name: same, command: a}\n- {name: gone, command: b}\n- {name: edited, command: c}\n- {name: renv, command: d, env: {K: '1'}}",
        );
        let new = servers(
            "servers:\n- {name: edited, command: c, timeout: 5s}\n- {name: same, command: a}\n- {name: fresh, command: e}\n- {name: renv, command: d, env: {K: '2'}}",
        );
        let plan = plan(&old, &new);
        assert_eq!(names(&plan.start), ["fresh"]);
        assert_eq!(names(&plan.stop), ["gone"]);
        assert_eq!(
            names(&plan.restart),
            ["edited", "renv"],
            "a secret's value counts too"
        );
        assert_eq!(names(&plan.keep), ["same"]);
    }

    #[test]
    fn a_new_replica_count_restarts_the_server() {
        let old =
            servers("servers:\n- {name: a, command: x}\n- {name: b, command: y, replicas: 2}");
        let new = servers(
            "servers:\n- {name: a, command: x, replicas: 3}\n- {name: b, command: y, replicas: 2}",
        );
        let plan = plan(&old, &new);
        assert_eq!(names(&plan.restart), ["a"]);
        assert_eq!(names(&plan.keep), ["b"]);
    }

    #[test]
    fn reshaping_tools_keeps_the_session() {
        let old = servers("servers:\n- {name: a, command: x, tools: [t]}");
        let new = servers(
            "servers:\n- {name: a, command: x, tools: [{name: t, as: u, arguments: {org: acme}}]}",
        );
        let plan = plan(&old, &new);
        assert_eq!(names(&plan.keep), ["a"]);
        assert!(plan.restart.is_empty());
    }

    #[test]
    fn the_same_configuration_changes_nothing() {
        let specs = servers("servers:\n- {name: a, command: x}\n- {name: b, url: 'http://h/mcp'}");
        let plan = plan(&specs, &specs);
        assert_eq!(names(&plan.keep), ["a", "b"]);
        assert!(plan.start.is_empty() && plan.stop.is_empty() && plan.restart.is_empty());
    }
}
