//! Tests of the catalog's shape as configured: `tools` entries with overrides, `views`, and
//! tokens bound to views.

use serde_json::json;

use super::{errors::assert_errors, ok};
use crate::domain::overrides::ToolRule;

#[test]
fn tool_entries_are_names_or_overrides() {
    let config = ok("servers:
- name: gh
  command: gh-mcp
  prefix: gh_
  tools:
    - create_issue
    - name: search_code
      as: code_search
      description: Search code in the acme organisation.
      arguments: {org: acme, key: '${API_KEY}', depth: 2}
");
    let tools = &config.servers[0].tools;
    assert_eq!(tools[0], ToolRule::plain("create_issue"));
    let search = &tools[1];
    assert_eq!(
        (
            search.name.as_str(),
            search.rename.as_deref(),
            search.description.as_deref()
        ),
        (
            "search_code",
            Some("code_search"),
            Some("Search code in the acme organisation.")
        )
    );
    assert_eq!(
        serde_json::Value::Object((*search.arguments).clone()),
        json!({"org": "acme", "key": "key-123-secret", "depth": 2}),
        "string values are expanded"
    );
}

#[test]
fn bad_tool_entries_are_named() {
    assert_errors(
        "servers:
- name: a
  command: x
  prefix: a_
  tools:
    - ''
    - 7
    - {as: b}
    - {name: t, as: 'bad name'}
    - {name: u, rename: v}
    - {name: w, arguments: [1]}
    - {name: t2, as: dup}
    - {name: t3, as: dup}
    - {name: t2}
",
        &[
            ("servers[0] (a).tools[0]", "tool name must not be empty"),
            (
                "servers[0] (a).tools[1]",
                "expected a tool name or a mapping",
            ),
            ("servers[0] (a).tools[2]", "missing field \"name\""),
            ("servers[0] (a).tools[3].as", "contains ' '"),
            ("servers[0] (a).tools[4].rename", "unknown field"),
            ("servers[0] (a).tools[5].arguments", ""),
            (
                "servers[0] (a).tools[7]",
                "two tools would be exposed as \"a_dup\"",
            ),
            ("servers[0] (a).tools[8]", "listed twice"),
        ],
    );
}

#[test]
fn views_and_the_tokens_bound_to_them() {
    let config = super::parse_with_env(
        "views: {support: ['jira_*', fs_read_file]}
auth:
  tokens:
    - {name: s, value_env: TOKEN, view: support}
",
    )
    .unwrap();
    assert_eq!(config.views["support"], ["jira_*", "fs_read_file"]);
    assert_eq!(config.auth.tokens[0].view.as_deref(), Some("support"));
    assert_errors(
        "views: {'bad/name': [x], empty: [], notalist: x, odd: ['', 3]}
auth:
  tokens:
    - {value_env: TOKEN, view: suport}
",
        &[
            ("views.bad/name", "use only letters"),
            ("views.empty", "at least one tool pattern"),
            ("views.notalist", "expected a list of tool patterns"),
            ("views.odd[0]", "non-empty tool pattern"),
            ("views.odd[1]", "non-empty tool pattern"),
            (
                "auth.tokens[0].view",
                "no view \"suport\" in \"views\"; expected one of",
            ),
        ],
    );
    assert_errors(
        "auth: {tokens: [{value_env: TOKEN, view: x}]}",
        &[("auth.tokens[0].view", "defines no \"views\"")],
    );
}
