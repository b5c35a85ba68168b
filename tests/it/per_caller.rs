//! `isolation: per-caller`: each caller's calls run in a session of its own (server-memory's
//! knowledge graph is one caller's only), filled in with that caller's values (path-safe in a
//! process, as they are in HTTP headers), opened on first use, closed when idle or to make room,
//! replaced when it dies, and never shared.

use crate::common::{self, Broker, Server, demo, memory, servers::HttpServer, url_server};
use serde_json::{Value, json};
use tonic::Code;

/// `auth` with one static token per caller: caller `name` sends `token-<name>`.
fn callers(names: &[&str]) -> (Value, Vec<(String, String)>) {
    let tokens: Vec<Value> = names
        .iter()
        .enumerate()
        .map(|(i, name)| json!({"name": name, "value_env": format!("TOKEN_{i}")}))
        .collect();
    let env = names
        .iter()
        .enumerate()
        .map(|(i, name)| (format!("TOKEN_{i}"), format!("token-{name}")))
        .collect();
    (json!({"tokens": tokens}), env)
}

async fn broker(names: &[&str], server: Server) -> Broker {
    let (auth, env) = callers(names);
    let mut builder = Broker::builder().top("auth", auth).server(server);
    for (key, value) in &env {
        builder = builder.env(key, value);
    }
    let broker = builder.start().await;
    common::wait_health(broker.channel.clone(), "toolbroker.v1.ToolBroker").await;
    broker
}

fn token(name: &str) -> String {
    format!("token-{name}")
}

/// `whoami` as `caller` (with `headers`), asking for the environment variables `env`.
async fn whoami(
    broker: &Broker,
    caller: &str,
    headers: &[(&'static str, &str)],
    env: &[&str],
) -> Result<Value, tonic::Status> {
    let arguments = json!({ "env": env }).to_string();
    let answer = broker
        .call_as(Some(&token(caller)), headers, "whoami", &arguments)
        .await?;
    assert!(!answer.is_error, "{answer:?}");
    Ok(serde_json::from_str(&answer.text).expect("whoami answers JSON"))
}

async fn sessions(broker: &Broker, server: &str) -> u32 {
    let request = common::as_caller(
        Some(&token("admin")),
        &[],
        toolbroker::proto::ListServersRequest {},
    );
    let servers = broker.client.clone().list_servers(request).await.unwrap();
    let status = servers.into_inner().servers;
    status
        .into_iter()
        .find(|s| s.name == server)
        .unwrap()
        .sessions
}

/// The demo over stdio, one process per caller.
fn per_caller_demo() -> Server {
    demo("demo").set("isolation", "per-caller")
}

#[tokio::test]
async fn each_caller_gets_a_memory_store_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let file = format!("{}/${{caller.id}}.json", dir.path().display());
    let server = memory("memory")
        .set("isolation", "per-caller")
        .set("env", json!({"MEMORY_FILE_PATH": file}));
    let broker = broker(&["alice", "bob", "admin"], server).await;
    let secret = r#"{"entities": [{"name": "alice-secret", "entityType": "note", "observations": ["only alice"]}]}"#;
    let created = broker
        .call_as(Some(&token("alice")), &[], "create_entities", secret)
        .await
        .unwrap();
    assert!(!created.is_error, "{created:?}");

    let broker = &broker;
    let graph = |caller: &'static str| async move {
        let answer = broker
            .call_as(Some(&token(caller)), &[], "read_graph", "{}")
            .await
            .unwrap();
        answer.text
    };
    assert!(graph("alice").await.contains("alice-secret"));
    assert!(
        !graph("bob").await.contains("alice-secret"),
        "bob sees nothing of alice's"
    );
    let alice_file = std::fs::read_to_string(dir.path().join("alice.json")).unwrap();
    assert!(alice_file.contains("alice-secret"));
    let bob_file = std::fs::read_to_string(dir.path().join("bob.json")).unwrap_or_default();
    assert!(!bob_file.contains("alice-secret"));
    assert_eq!(
        sessions(broker, "memory").await,
        2,
        "one session per caller"
    );
}

#[tokio::test]
async fn caller_values_fill_args_env_and_cwd_and_cannot_leave_their_folder() {
    let dir = tempfile::tempdir().unwrap();
    // `${caller.id}` as the README says: a plain id of the first kind (tokens) as it is, anything
    // else readable part ~ sha256(kind NUL id)[..16]; the discovery session is anonymous.
    let (etc, discovery) = (
        "etc~7e96a1004d7d7b0f",
        "anonymous.discovery~55034732b88b865b",
    );
    for folder in ["alice", etc, discovery] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
    }
    let server = per_caller_demo()
        .args(["--tag", "${caller.id}"])
        .set(
            "env",
            json!({"CALLER_HOME": "/data/${caller.id}", "TENANT": "${caller.header.x-tenant}"}),
        )
        .set("cwd", format!("{}/${{caller.id}}", dir.path().display()))
        .set("discovery", json!({"headers": {"x-tenant": "none"}}));
    let broker = broker(&["alice", "../../etc"], server).await;
    let env = ["CALLER_HOME", "TENANT"];

    let alice = whoami(&broker, "alice", &[("x-tenant", "blue/green")], &env)
        .await
        .unwrap();
    assert_eq!(
        alice["env"],
        json!({"CALLER_HOME": "/data/alice", "TENANT": "blue_green~1987874e14c798a2"})
    );
    assert_eq!(alice["cwd"], dir.path().join("alice").display().to_string());
    assert_eq!(alice["args"], json!(["demo-server", "--tag", "alice"]));

    let sneaky = whoami(&broker, "../../etc", &[("x-tenant", "red")], &env)
        .await
        .unwrap();
    assert_eq!(sneaky["env"]["CALLER_HOME"], format!("/data/{etc}"));
    assert_eq!(sneaky["cwd"], dir.path().join(etc).display().to_string());
    assert_ne!(alice["pid"], sneaky["pid"], "a process each");
    let again = whoami(&broker, "alice", &[("x-tenant", "blue/green")], &env)
        .await
        .unwrap();
    assert_eq!(
        again["pid"], alice["pid"],
        "the same caller, the same process"
    );

    let missing = whoami(&broker, "alice", &[], &env).await.unwrap_err();
    assert_eq!(missing.code(), Code::FailedPrecondition, "{missing:?}");
    assert!(
        missing.message().contains("${caller.header.x-tenant}"),
        "{}",
        missing.message()
    );
}

#[tokio::test]
async fn an_http_server_gets_each_callers_headers() {
    let http = HttpServer::demo("streamable-http", None).await;
    let server = url_server("remote", &http.url)
        .set("isolation", "per-caller")
        .set(
            "headers",
            json!({"Authorization": "Bearer ${caller.token}", "X-Tenant": "${caller.header.x-tenant}"}),
        )
        .set(
            "discovery",
            json!({"token": "discovery-token", "headers": {"x-tenant": "discovery"}}),
        );
    let broker = broker(&["alice", "bob"], server).await;
    let headers = |report: &Value| {
        (
            report["headers"]["authorization"]
                .as_str()
                .unwrap()
                .to_owned(),
            report["headers"]["x-tenant"].as_str().unwrap().to_owned(),
        )
    };
    let alice = whoami(&broker, "alice", &[("x-tenant", "blue")], &[])
        .await
        .unwrap();
    assert_eq!(
        headers(&alice),
        ("Bearer token-alice".into(), "blue".into())
    );
    let bob = whoami(&broker, "bob", &[("x-tenant", "red")], &[])
        .await
        .unwrap();
    assert_eq!(headers(&bob), ("Bearer token-bob".into(), "red".into()));
    // A caller's new values go with its next request, in the same session.
    let moved = whoami(&broker, "alice", &[("x-tenant", "green")], &[])
        .await
        .unwrap();
    assert_eq!(
        headers(&moved),
        ("Bearer token-alice".into(), "green".into())
    );
    assert!(
        !broker.dump().contains("token-alice"),
        "tokens stay out of the log"
    );
}

#[tokio::test]
async fn max_sessions_makes_room_from_idle_sessions_and_refuses_when_all_are_busy() {
    let server = per_caller_demo().set("max_sessions", 2);
    let broker = broker(&["a", "b", "c", "admin"], server).await;
    let pid = |report: Value| report["pid"].as_u64().unwrap() as u32;
    let a = pid(whoami(&broker, "a", &[], &[]).await.unwrap());
    whoami(&broker, "b", &[], &[]).await.unwrap();
    // A third caller: the least recently used idle session (a's) is closed to make room.
    whoami(&broker, "c", &[], &[]).await.unwrap();
    common::wait_gone(a).await;
    assert_eq!(sessions(&broker, "demo").await, 2);

    // b and c busy: a has no room.
    let sleeping = |caller: &'static str| {
        let request = common::as_caller(
            Some(&token(caller)),
            &[],
            common::call_request("sleep", r#"{"ms": 3000}"#),
        );
        let mut client = broker.client.clone();
        tokio::spawn(async move { client.call_tool(request).await })
    };
    let (b, c) = (sleeping("b"), sleeping("c"));
    broker
        .wait_for_logs("two sleeps", 2, common::stderr_says("sleep started"))
        .await;
    let refused = whoami(&broker, "a", &[], &[]).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("max_sessions"),
        "{}",
        refused.message()
    );
    for call in [b, c] {
        assert!(call.await.unwrap().is_ok());
    }
    // Done sleeping, they are idle again: a gets its room.
    whoami(&broker, "a", &[], &[]).await.unwrap();
}

#[tokio::test]
async fn idle_sessions_close_and_a_dead_one_is_replaced_without_touching_others() {
    let server = per_caller_demo().set("idle_timeout", "1s");
    let broker = broker(&["a", "b", "admin"], server).await;
    let pid = |report: Value| report["pid"].as_u64().unwrap() as u32;
    let a = pid(whoami(&broker, "a", &[], &[]).await.unwrap());
    common::wait_gone(a).await;
    common::poll(
        "the idle session closed",
        std::time::Duration::from_millis(100),
        || async { (sessions(&broker, "demo").await == 0).then_some(()) },
    )
    .await;

    // a's process dies mid-call: its call fails, its next call gets a fresh process, and b's
    // session never notices.
    let b = pid(whoami(&broker, "b", &[], &[]).await.unwrap());
    let crashed = broker
        .call_as(Some(&token("a")), &[], "crash", "{}")
        .await
        .unwrap_err();
    assert_eq!(crashed.code(), Code::Unavailable, "{crashed:?}");
    let fresh = pid(whoami(&broker, "a", &[], &[]).await.unwrap());
    assert_ne!(fresh, a);
    assert_eq!(pid(whoami(&broker, "b", &[], &[]).await.unwrap()), b);
}

#[tokio::test]
async fn sigterm_stops_every_callers_process() {
    let server = per_caller_demo();
    let broker = broker(&["a", "b"], server).await;
    let mut pids = Vec::new();
    for caller in ["a", "b"] {
        let report = whoami(&broker, caller, &[], &[]).await.unwrap();
        pids.push(report["pid"].as_u64().unwrap() as u32);
    }
    let status = broker.terminate().await;
    assert!(status.success(), "{status:?}");
    for pid in pids {
        common::wait_gone(pid).await;
    }
}
