use std::time::{Duration, SystemTime};

use serde_json::json;

use super::*;
use crate::domain::{names::ToolName, state::Transport, tool::Annotations};

fn server(name: &str) -> ServerName {
    ServerName::parse(name).unwrap()
}

fn policy(name: &str, prefix: &str, allow: &[&str]) -> ServerPolicy {
    ServerPolicy {
        name: server(name),
        prefix: prefix.into(),
        tools: allow.iter().map(|s| ToolRule::plain(*s)).collect(),
    }
}

fn condition(state: ServerState, message: &str) -> ServerCondition {
    ServerCondition {
        state,
        message: message.into(),
        transport: Transport::Stdio,
        restarts: 0,
        since: SystemTime::UNIX_EPOCH + Duration::from_secs(1),
        protocol: None,
        icons: Default::default(),
    }
}

fn spec(name: &str, description: &str) -> ToolSpec {
    let schema = json!({"type": "object", "properties": {"x": {"type": "string"}}});
    let serde_json::Value::Object(schema) = schema else {
        unreachable!()
    };
    ToolSpec::new(
        ToolName::new(name),
        description.into(),
        schema,
        None,
        Annotations::default(),
    )
}

fn catalog(policies: Vec<ServerPolicy>) -> Catalog {
    Catalog::new(
        policies
            .into_iter()
            .map(|p| (p, condition(ServerState::Connecting, "starting")))
            .collect(),
    )
}

fn ready(catalog: &mut Catalog, name: &str, tools: &[&str]) -> Outcome {
    let specs = tools.iter().map(|t| spec(t, "d")).collect();
    let first = catalog.apply(Update::Tools(server(name), specs));
    assert!(
        first.events.is_empty(),
        "tools of a server not READY are not exposed"
    );
    catalog.apply(Update::Condition(
        server(name),
        condition(ServerState::Ready, "ready"),
    ))
}

fn names(catalog: &Catalog) -> Vec<&str> {
    catalog.tools().keys().map(|n| n.as_str()).collect()
}

fn tools_change<'a>(outcome: &'a Outcome, name: &str) -> &'a ToolsChange {
    outcome
        .events
        .iter()
        .find_map(|e| match &e.change {
            Change::Tools(s, c) if s.as_str() == name => Some(c),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tools change for {name}: {:?}", outcome.events))
}

#[test]
fn ready_server_exposes_prefixed_tools_sorted() {
    let mut cat = catalog(vec![policy("a", "a_", &[])]);
    let outcome = ready(&mut cat, "a", &["zeta", "alpha"]);
    assert_eq!(names(&cat), ["a_alpha", "a_zeta"]);
    let change = tools_change(&outcome, "a");
    assert_eq!(change.added.len(), 2);
    let view = cat.server("a").unwrap();
    assert_eq!(view.tool_count, 2);
    assert_eq!(view.condition.state, ServerState::Ready);
    assert_eq!(cat.tool("a_alpha").unwrap().spec.original.as_str(), "alpha");
}

#[test]
fn every_event_gets_the_next_revision() {
    let mut cat = catalog(vec![policy("a", "", &[])]);
    assert_eq!(cat.revision(), 0);
    let outcome = ready(&mut cat, "a", &["t"]);
    let revisions: Vec<u64> = outcome.events.iter().map(|e| e.revision).collect();
    assert_eq!(revisions, [1, 2], "tools change then server status");
    assert!(matches!(outcome.events[0].change, Change::Tools(..)));
    assert!(matches!(outcome.events[1].change, Change::Server(..)));
    assert_eq!(cat.revision(), 2);
}

#[test]
fn allow_list_filters_and_reports_missing_names() {
    let mut cat = catalog(vec![policy("a", "", &["keep", "typo"])]);
    let outcome = ready(&mut cat, "a", &["keep", "drop"]);
    assert_eq!(names(&cat), ["keep"]);
    let view = cat.server("a").unwrap();
    assert!(
        view.message
            .contains("\"typo\" in the \"tools\" list is not offered"),
        "{}",
        view.message
    );
    assert_eq!(outcome.warnings.len(), 1);
}

#[test]
fn first_configured_server_wins_a_collision_whatever_the_connect_order() {
    let mut cat = catalog(vec![policy("first", "", &[]), policy("second", "", &[])]);
    ready(&mut cat, "second", &["echo", "only2"]);
    assert_eq!(cat.tool("echo").unwrap().server.as_str(), "second");

    let outcome = ready(&mut cat, "first", &["echo"]);
    assert_eq!(cat.tool("echo").unwrap().server.as_str(), "first");
    assert_eq!(tools_change(&outcome, "second").removed[0].as_str(), "echo");
    assert_eq!(
        tools_change(&outcome, "first").added[0].name.as_str(),
        "echo"
    );
    let second = cat.server("second").unwrap();
    assert_eq!(second.tool_count, 1);
    assert!(
        second.message.contains("\"echo\" skipped") && second.message.contains("\"first\""),
        "{}",
        second.message
    );
    assert!(outcome.warnings.iter().any(|(s, _)| s.as_str() == "second"));
}

#[test]
fn sanitized_names_are_warned_once() {
    let mut cat = catalog(vec![policy("a", "", &[])]);
    let outcome = ready(&mut cat, "a", &["ns.tool"]);
    assert_eq!(names(&cat), ["ns_tool"]);
    assert_eq!(
        cat.tool("ns_tool").unwrap().spec.original.as_str(),
        "ns.tool"
    );
    assert_eq!(outcome.warnings.len(), 1);
    assert!(outcome.warnings[0].1.contains("exposed as"));
    let again = cat.apply(Update::Tools(server("a"), vec![spec("ns.tool", "d")]));
    assert!(again.warnings.is_empty(), "same warning is not repeated");
    assert!(again.events.is_empty(), "nothing changed");
    assert_eq!(
        cat.server("a").unwrap().message,
        "ready",
        "renames stay out of status"
    );
}

#[test]
fn relisting_reports_added_updated_and_removed() {
    let mut cat = catalog(vec![policy("a", "", &[])]);
    ready(&mut cat, "a", &["keep", "change", "gone"]);
    let outcome = cat.apply(Update::Tools(
        server("a"),
        vec![
            spec("keep", "d"),
            spec("change", "new text"),
            spec("new", "d"),
        ],
    ));
    let change = tools_change(&outcome, "a");
    let added: Vec<_> = change.added.iter().map(|t| t.name.as_str()).collect();
    let updated: Vec<_> = change.updated.iter().map(|t| t.name.as_str()).collect();
    let removed: Vec<_> = change.removed.iter().map(|n| n.as_str()).collect();
    assert_eq!(
        (added, updated, removed),
        (vec!["new"], vec!["change"], vec!["gone"])
    );
    assert_eq!(
        outcome.events.len(),
        1,
        "one tools event; tool count unchanged"
    );
}

#[test]
fn losing_a_server_removes_its_tools() {
    let mut cat = catalog(vec![policy("a", "", &[]), policy("b", "", &[])]);
    ready(&mut cat, "a", &["x"]);
    ready(&mut cat, "b", &["y"]);
    let outcome = cat.apply(Update::Condition(
        server("a"),
        condition(ServerState::Failed, "exited with status 3"),
    ));
    assert_eq!(names(&cat), ["y"]);
    assert_eq!(tools_change(&outcome, "a").removed[0].as_str(), "x");
    let view = cat.server("a").unwrap();
    assert_eq!(
        (view.tool_count, view.message.as_str()),
        (0, "exited with status 3")
    );
    assert_eq!(cat.unready_owner("x").map(|v| v.name.as_str()), Some("a"));
    assert!(
        cat.unready_owner("y").is_none(),
        "b is ready: y is simply exposed"
    );
    assert!(cat.unready_owner("nope").is_none());
}

#[test]
fn unknown_server_updates_change_nothing() {
    let mut cat = catalog(vec![policy("a", "", &[])]);
    let outcome = cat.apply(Update::Condition(
        server("zz"),
        condition(ServerState::Ready, ""),
    ));
    assert!(outcome.events.is_empty());
    assert_eq!(cat.revision(), 0);
}

#[test]
fn long_status_messages_are_capped() {
    let message = compose_message("ready", &["1".into(), "2".into(), "3".into(), "4".into()]);
    assert_eq!(message, "ready; 1; 2; 3; and 1 more (see the log)");
    assert_eq!(compose_message("", &["1".into()]), "1");
}

#[test]
fn reconfiguring_adds_announces_removes_and_reorders_servers() {
    let mut cat = catalog(vec![policy("a", "", &[]), policy("b", "", &[])]);
    ready(&mut cat, "a", &["shared", "only_a"]);
    ready(&mut cat, "b", &["shared", "only_b"]);
    assert_eq!(cat.tool("shared").unwrap().server.as_str(), "a");

    // b moves first (it now wins `shared`), a stays, c is new, nothing is dropped yet.
    let starting = condition(ServerState::Connecting, "starting");
    let outcome = cat.configure(vec![
        (policy("b", "", &[]), starting.clone()),
        (policy("a", "", &[]), starting.clone()),
        (policy("c", "", &[]), starting.clone()),
    ]);
    assert_eq!(cat.tool("shared").unwrap().server.as_str(), "b");
    assert_eq!(
        cat.server("a").unwrap().condition.state,
        ServerState::Ready,
        "a keeps its state"
    );
    let announced: Vec<&str> = outcome
        .events
        .iter()
        .filter_map(|e| match &e.change {
            Change::Server(view) => Some(view.name.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        announced.contains(&"c"),
        "the new server is announced: {announced:?}"
    );
    let order: Vec<&str> = cat.servers().map(|v| v.name.as_str()).collect();
    assert_eq!(order, ["b", "a", "c"]);

    // a is dropped: its tools go, and a last STOPPED status says so.
    let outcome = cat.configure(vec![
        (policy("b", "", &[]), starting.clone()),
        (policy("c", "", &[]), starting),
    ]);
    assert_eq!(tools_change(&outcome, "a").removed[0].as_str(), "only_a");
    let last = outcome.events.last().unwrap();
    let Change::Server(gone) = &last.change else {
        panic!("last event is not a status: {last:?}")
    };
    assert_eq!(
        (gone.name.as_str(), gone.condition.state),
        ("a", ServerState::Stopped)
    );
    assert!(gone.message.contains("removed"));
    assert!(cat.server("a").is_none());
    assert!(cat.tool("only_a").is_none());
}

#[test]
fn a_new_policy_applies_to_a_kept_server() {
    let mut cat = catalog(vec![policy("a", "", &[])]);
    ready(&mut cat, "a", &["x", "y"]);
    let outcome = cat.configure(vec![(
        policy("a", "p_", &["x"]),
        condition(ServerState::Connecting, ""),
    )]);
    assert_eq!(names(&cat), ["p_x"]);
    let change = tools_change(&outcome, "a");
    assert_eq!(change.removed.len(), 2);
    assert_eq!(change.added[0].name.as_str(), "p_x");
}

#[test]
fn overrides_rename_reshape_and_follow_a_new_policy() {
    let rule = |description: &str| ToolRule {
        name: "keep".into(),
        rename: Some("kept".into()),
        description: Some(description.into()),
        arguments: Arc::new(json!({"x": "fixed", "y": 1}).as_object().cloned().unwrap()),
    };
    let mut shaped = policy("a", "a_", &[]);
    shaped.tools = vec![rule("New words.")];
    let mut cat = catalog(vec![shaped.clone()]);
    let outcome = ready(&mut cat, "a", &["keep", "drop"]);
    assert_eq!(names(&cat), ["a_kept"]);
    let tool = cat.tool("a_kept").unwrap();
    assert_eq!(
        (tool.spec.description.as_str(), tool.spec.original.as_str()),
        ("New words.", "keep")
    );
    let params = tool.spec.params();
    assert!(params.is_empty(), "x is fixed: {params:?}");
    assert_eq!(tool.fixed["x"], "fixed");
    assert!(
        outcome
            .warnings
            .iter()
            .any(|(_, w)| w.contains("[\"y\"]") && w.contains("not in its input schema")),
        "{:?}",
        outcome.warnings
    );
    // The same server under a reworded override: one update, same session.
    shaped.tools = vec![rule("Newer words.")];
    let outcome = cat.configure(vec![(shaped, condition(ServerState::Ready, "ready"))]);
    let change = tools_change(&outcome, "a");
    assert_eq!(change.updated.len(), 1);
    assert_eq!(change.updated[0].spec.description, "Newer words.");
    assert!(change.added.is_empty() && change.removed.is_empty());
    assert!(cat.unready_owner("a_kept").is_none());
}
