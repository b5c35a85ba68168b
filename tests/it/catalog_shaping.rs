//! Shaping the catalog: tool overrides (`as`, `description`, fixed `arguments`), views (by
//! request and bound to a token), and SearchTools over a catalog of real servers
//! (server-everything, server-filesystem, server-memory and the demo), all under hot reload.

use crate::common::{
    self, Broker, Config, Watch, as_caller, command, demo, everything, memory, names,
    npm_package_file,
};
use serde_json::{Value, json};
use tonic::Code;
use toolbroker::proto::{self, watch_event::Event};

/// server-filesystem over stdio, allowed into `dir`.
fn filesystem(name: &str, dir: &std::path::Path) -> common::Server {
    let js = npm_package_file("@modelcontextprotocol/server-filesystem/dist/index.js");
    command(
        name,
        "node",
        &[&js.display().to_string(), &dir.display().to_string()],
    )
}

/// A broker with all four servers, prefixed `ev_`, `fs_`, `mem_` (the demo unprefixed); its
/// temp dir lives as long as it.
async fn four_servers(
    extra: impl FnOnce(common::Builder) -> common::Builder,
) -> (Broker, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let memory_file = dir.path().join("memory.jsonl").display().to_string();
    let builder = Broker::builder()
        .server(demo("demo"))
        .server(everything("everything").prefix("ev_"))
        .server(filesystem("fs", dir.path()).prefix("fs_"))
        .server(
            memory("memory")
                .prefix("mem_")
                .set("env", json!({"MEMORY_FILE_PATH": memory_file})),
        );
    let broker = extra(builder).start().await;
    broker.wait_ready().await;
    (broker, dir)
}

fn search(query: &str, limit: u32) -> proto::SearchToolsRequest {
    proto::SearchToolsRequest {
        query: query.into(),
        limit,
        ..Default::default()
    }
}

async fn found(
    broker: &Broker,
    token: Option<&str>,
    request: proto::SearchToolsRequest,
) -> Vec<String> {
    let response = broker
        .client
        .clone()
        .search_tools(as_caller(token, &[], request))
        .await
        .expect("SearchTools")
        .into_inner();
    let scores: Vec<f64> = response.matches.iter().map(|m| m.score).collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "best first: {scores:?}"
    );
    response
        .matches
        .into_iter()
        .map(|m| m.tool.expect("a tool").name)
        .collect()
}

#[tokio::test]
async fn search_ranks_the_tool_a_task_needs_first_among_real_servers() {
    let (broker, _dir) = four_servers(|b| b).await;
    assert!(
        broker.tools().await.tools.len() > 40,
        "a catalog worth searching"
    );
    let cases = [
        ("compress a file with gzip", "ev_gzip-file-as-resource"),
        ("move or rename a file", "fs_move_file"),
        (
            "create entities in the knowledge graph",
            "mem_create_entities",
        ),
        ("show the directory tree", "fs_directory_tree"),
        ("sleep for a while", "sleep"),
        ("add observations to an entity", "mem_add_observations"),
        ("write a file", "fs_write_file"),
    ];
    for (query, best) in cases {
        let found = found(&broker, None, search(query, 3)).await;
        assert_eq!(
            found.first().map(String::as_str),
            Some(best),
            "{query:?}: {found:?}"
        );
        assert!(found.len() <= 3);
    }

    // Only the servers asked for.
    let mut only_memory = search("read a file", 10);
    only_memory.servers = vec!["memory".into()];
    let from_memory = found(&broker, None, only_memory).await;
    assert!(
        from_memory.iter().all(|name| name.starts_with("mem_")),
        "{from_memory:?}"
    );
    assert!(
        found(&broker, None, search("zyzzyva quux", 10))
            .await
            .is_empty()
    );

    let mut client = broker.client.clone();
    let empty = client.search_tools(search("  ", 5)).await.unwrap_err();
    assert_eq!(empty.code(), Code::InvalidArgument);
    assert!(
        empty.message().contains("query is empty"),
        "{}",
        empty.message()
    );
    let mut unknown_view = search("file", 5);
    unknown_view.view = "nope".into();
    let refused = client.search_tools(unknown_view).await.unwrap_err();
    assert_eq!(refused.code(), Code::NotFound);
    assert!(
        refused.message().contains("\"nope\""),
        "{}",
        refused.message()
    );
    let many = client
        .search_tools(search("file", 1000))
        .await
        .unwrap()
        .into_inner();
    assert!(!many.matches.is_empty() && many.matches.len() <= 100);
}

#[tokio::test]
async fn search_and_views_show_only_what_the_caller_may_see() {
    let auth = json!({"tokens": [
        {"name": "memory-only", "value_env": "MEM_TOKEN", "tools": ["mem_*"]},
        {"name": "files", "value_env": "FILES_TOKEN", "view": "files", "tools": ["fs_read_*", "fs_list_*"]},
    ]});
    let views = json!({"files": ["fs_*"], "support": ["mem_*", "echo"]});
    let (broker, _dir) = four_servers(|b| {
        b.top("auth", auth)
            .top("views", views)
            .env("MEM_TOKEN", "mem-token")
            .env("FILES_TOKEN", "files-token")
    })
    .await;
    // Search: a restricted token never finds what it may not use.
    let for_memory = found(
        &broker,
        Some("mem-token"),
        search("create a file or directory", 10),
    )
    .await;
    assert!(
        !for_memory.is_empty() && for_memory.iter().all(|n| n.starts_with("mem_")),
        "{for_memory:?}"
    );
    let for_files = found(&broker, Some("files-token"), search("write a file", 10)).await;
    assert!(
        !for_files.contains(&"fs_write_file".to_owned()),
        "{for_files:?}"
    );
    assert!(
        for_files
            .iter()
            .all(|n| n.starts_with("fs_read_") || n.starts_with("fs_list_"))
    );

    // A view asked for in ListTools and SearchTools.
    let listed = |view: &str, token: Option<&'static str>| {
        let request = as_caller(
            token,
            &[],
            proto::ListToolsRequest {
                view: view.into(),
                ..Default::default()
            },
        );
        let mut client = broker.client.clone();
        async move { client.list_tools(request).await }
    };
    let support = listed("support", Some("mem-token"))
        .await
        .unwrap()
        .into_inner();
    let support_names = names(&support.tools);
    assert!(
        support_names.iter().all(|n| n.starts_with("mem_")),
        "token ∩ view: {support_names:?}"
    );
    let files = listed("files", Some("files-token"))
        .await
        .unwrap()
        .into_inner();
    assert!(names(&files.tools).contains(&"fs_read_text_file"));
    assert!(!names(&files.tools).contains(&"fs_write_file"));
    let unknown = listed("sales", Some("mem-token")).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    assert!(
        unknown.message().contains("files, support"),
        "{}",
        unknown.message()
    );
    let mut in_view = search("echo back a message", 5);
    in_view.view = "support".into();
    let found_in_view = found(&broker, Some("files-token"), in_view).await;
    assert!(
        found_in_view.is_empty(),
        "the token's view and the request's: {found_in_view:?}"
    );

    // A token bound to a view may not call outside it, whatever it asks.
    let outside = broker
        .call_as(Some("files-token"), &[], "echo", r#"{"message": "hi"}"#)
        .await
        .unwrap_err();
    assert!(
        matches!(outside.code(), Code::NotFound | Code::PermissionDenied),
        "{outside:?}"
    );
    let inside = broker
        .call_as(
            Some("files-token"),
            &[],
            "fs_list_allowed_directories",
            "{}",
        )
        .await
        .unwrap();
    assert!(!inside.is_error, "{inside:?}");

    // Watch of a view.
    let request = as_caller(
        Some("mem-token"),
        &[],
        proto::WatchRequest {
            view: "support".into(),
            ..Default::default()
        },
    );
    let stream = broker
        .client
        .clone()
        .watch(request)
        .await
        .unwrap()
        .into_inner();
    let snapshot = Watch::new(stream).snapshot().await;
    assert_eq!(names(&snapshot.tools), support_names);
}

#[tokio::test]
async fn overrides_rename_describe_and_pin_arguments_end_to_end() {
    let tools = json!([
        {"name": "echo", "as": "say", "description": "Say the message back."},
        {"name": "add", "arguments": {"b": 5}},
        "sleep",
    ]);
    let everything_tools =
        json!([{"name": "echo", "as": "pinned_echo", "arguments": {"message": "pinned"}}]);
    let broker = Broker::builder()
        .server(demo("demo").set("tools", tools))
        .server(
            everything("everything")
                .prefix("ev_")
                .set("tools", everything_tools),
        )
        .start()
        .await;
    broker.wait_ready().await;
    let listed = broker.tools().await.tools;
    assert_eq!(names(&listed), ["add", "ev_pinned_echo", "say", "sleep"]);
    let say = listed.iter().find(|t| t.name == "say").unwrap();
    assert_eq!(
        (say.description.as_str(), say.original_name.as_str()),
        ("Say the message back.", "echo")
    );
    let add = listed.iter().find(|t| t.name == "add").unwrap();
    let params: Vec<&str> = add.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(params, ["a"], "the fixed argument is no parameter");
    let schema: Value = serde_json::from_str(&add.input_schema_json).unwrap();
    assert!(schema["properties"].get("b").is_none(), "{schema}");
    assert!(
        !schema["required"].as_array().unwrap().contains(&json!("b")),
        "{schema}"
    );

    // Called under the new name; the fixed argument reaches the server.
    assert_eq!(broker.text("say", r#"{"message": "hi"}"#).await, "hi");
    assert_eq!(broker.text("add", r#"{"a": 2}"#).await, "7");
    assert_eq!(broker.text("ev_pinned_echo", "{}").await, "Echo: pinned");
    let sent_fixed = broker
        .call_as(None, &[], "add", r#"{"a": 2, "b": 40}"#)
        .await
        .unwrap_err();
    assert_eq!(sent_fixed.code(), Code::InvalidArgument);
    assert!(
        sent_fixed.message().contains("\"b\"") && sent_fixed.message().contains("fixed"),
        "{}",
        sent_fixed.message()
    );
    let old_name = broker
        .call_as(None, &[], "echo", r#"{"message": "hi"}"#)
        .await
        .unwrap_err();
    assert_eq!(old_name.code(), Code::NotFound, "{old_name:?}");
}

#[tokio::test]
async fn a_reload_reshapes_tools_and_views_without_restarting_sessions() {
    let before = Config::new()
        .top("views", json!({"math": ["add", "sum"], "gone": ["echo"]}))
        .server(demo("demo").set(
            "tools",
            json!([{"name": "add", "description": "Old words."}, "echo"]),
        ));
    let broker = Broker::builder().config(before).start().await;
    broker.wait_ready().await;
    let pid_before = common::children(broker.pid());
    let watch_view = |view: &str| {
        let request = proto::WatchRequest {
            view: view.into(),
            ..Default::default()
        };
        let mut client = broker.client.clone();
        async move { Watch::new(client.watch(request).await.unwrap().into_inner()) }
    };
    let mut math = watch_view("math").await;
    assert_eq!(names(&math.snapshot().await.tools), ["add"]);
    let mut gone = watch_view("gone").await;
    gone.snapshot().await;

    // `add` renamed, reworded, `b` fixed.
    let reshaped = || {
        demo("demo").set(
            "tools",
            json!([
                {"name": "add", "as": "sum", "description": "New words.", "arguments": {"b": 1}},
                "echo",
            ]),
        )
    };
    let after = Config::new()
        .top("views", json!({"math": ["add", "sum", "mul*"]}))
        .server(reshaped());
    broker.rewrite_config(&after.text());
    // The view's stream: the rename arrives as a change, the redefinition as a fresh snapshot
    // (in either order).
    let mut saw_sum = false;
    let mut saw_snapshot = false;
    while !(saw_sum && saw_snapshot) {
        match math.next().await.event {
            Some(Event::Snapshot(snapshot)) => {
                saw_snapshot = true;
                saw_sum |= names(&snapshot.tools) == ["sum"];
            }
            Some(Event::ToolsChanged(change)) => {
                saw_sum |= change
                    .added
                    .iter()
                    .any(|t| t.name == "sum" && t.description == "New words.");
            }
            _ => {}
        }
    }
    // The removed view's stream ends, saying why.
    let ended = gone.next_error().await;
    assert_eq!(ended.code(), Code::NotFound, "{ended:?}");

    assert_eq!(broker.text("sum", r#"{"a": 41}"#).await, "42");

    // The views alone redefined: a fresh snapshot, its revision above the last (the helper
    // checks that revisions increase).
    let views_only = Config::new()
        .top("views", json!({"math": ["sum", "echo"]}))
        .server(reshaped());
    broker.rewrite_config(&views_only.text());
    let snapshot = loop {
        if let Some(Event::Snapshot(snapshot)) = math.next().await.event {
            break snapshot;
        }
    };
    assert_eq!(names(&snapshot.tools), ["echo", "sum"]);
    assert_eq!(
        common::children(broker.pid()),
        pid_before,
        "the server was not restarted"
    );
    assert_eq!(broker.server("demo").await.restarts, 0);
    let reloaded = broker
        .wait_for_log("the reload", |l| l["message"] == "config reloaded")
        .await;
    assert_eq!(
        (&reloaded["unchanged"], &reloaded["restarted"]),
        (&json!(1), &json!(""))
    );
}
