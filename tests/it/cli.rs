//! The command line: `check`, exit codes, the default demo, and a clean shutdown that leaves no
//! process behind.

use std::process::Command as StdCommand;

use crate::common::{
    self, Broker, children, demo, demo_after, run_with_config, toolbroker_bin, wait_gone,
};

fn write_config(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broker.yaml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn check_accepts_a_valid_config() {
    let (_dir, path) = write_config(
        "servers:\n  - name: a\n    command: x\nmcpServers:\n  memory: { command: npx, args: [-y, pkg] }\n",
    );
    let output = run_with_config(&["check", "--config"], &path);
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("ok (2 servers)"));
}

#[test]
fn check_lists_every_problem_with_its_path_and_exits_2() {
    let (_dir, path) = write_config(
        "servers:\n  - name: a\n    comand: x\n  - name: b\n    command: y\n    timeout: soon\n  - name: a\n    url: http://h/\n",
    );
    let output = run_with_config(&["check", "--config"], &path);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for want in [
        "servers[0] (a).comand",
        "did you mean \"command\"",
        "servers[1] (b).timeout",
        "servers[2] (a).name",
    ] {
        assert!(stderr.contains(want), "{want} missing from:\n{stderr}");
    }
    assert!(
        stderr
            .lines()
            .all(|l| l.starts_with(&*path.to_string_lossy())),
        "every line names the file:\n{stderr}"
    );
}

#[test]
fn check_and_serve_read_every_file_the_config_names_before_starting_anything() {
    let dir = tempfile::tempdir().unwrap();
    let missing = |name: &str| dir.path().join(name).display().to_string();
    // A server that leaves a mark if it is ever started.
    let marker = dir.path().join("started");
    let config = serde_json::json!({
        "tls": {"cert": missing("tls.crt"), "key": missing("tls.key")},
        "auth": {"tokens": [{"name": "agent", "value_file": missing("token")}]},
        "servers": [{"name": "s", "command": "touch", "args": [marker.display().to_string()]}],
    });
    let (_config_dir, path) = write_config(&config.to_string());
    for args in [&["check"][..], &["serve", "--listen", "127.0.0.1:0"]] {
        let command = args[0];
        let output = run_with_config(&[args, &["--config"]].concat(), &path);
        assert_eq!(output.status.code(), Some(2), "{command}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        for field in ["tls.cert: ", "tls.key: ", "auth.tokens[0].value_file: "] {
            assert!(
                stderr.contains(field),
                "{command}: {field} missing from:\n{stderr}"
            );
        }
        assert!(
            stderr
                .lines()
                .all(|l| l.starts_with(&*path.to_string_lossy())),
            "{command}: every line names the file:\n{stderr}"
        );
        assert!(!stderr.contains("listening"), "{command} bound its port");
        assert!(!marker.exists(), "{command} started a server");
    }
}

#[test]
fn serve_with_a_bad_config_exits_2_without_listening() {
    let (_dir, path) = write_config("listen: nowhere\n");
    let output = run_with_config(&["serve", "--config"], &path);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("listen"));
}

#[tokio::test]
async fn serve_without_a_config_serves_the_demo_tools() {
    let broker = Broker::builder().without_config().start().await;
    broker.wait_ready().await;
    let echo = broker.call("echo", r#"{"message": "demo"}"#).await.unwrap();
    assert_eq!((echo.text.as_str(), echo.server.as_str()), ("demo", "demo"));
}

#[tokio::test]
async fn sigterm_stops_the_broker_and_every_process_it_started() {
    // The second server starts a grandchild, as `npx` does: it must not outlive the broker.
    let broker = Broker::builder()
        .server(demo("demo"))
        .server(demo_after("parent", "sleep 300 &"))
        .start()
        .await;
    broker.wait_ready().await;
    let servers = children(broker.pid());
    assert_eq!(servers.len(), 2, "one process per server: {servers:?}");
    let grandchildren: Vec<u32> = servers.iter().flat_map(|pid| children(*pid)).collect();
    assert_eq!(grandchildren.len(), 1, "the sleep: {grandchildren:?}");

    let status = broker.terminate().await;
    assert!(status.success(), "exit status {status:?}");
    // A killed process can take a moment to be torn down.
    for pid in servers.iter().chain(&grandchildren) {
        wait_gone(*pid).await;
    }
}

/// `toolbroker tools` and `call` against a broker with `auth`, as a caller would.
fn client(args: &[&str], addr: std::net::SocketAddr, token: Option<&str>) -> std::process::Output {
    let mut command = StdCommand::new(toolbroker_bin());
    command
        .args(args)
        .args(["--addr", &format!("http://{addr}")])
        .env_remove("TOOLBROKER_TOKEN");
    if let Some(token) = token {
        command.env("TOOLBROKER_TOKEN", token);
    }
    command.output().expect("run toolbroker")
}

#[tokio::test]
async fn tools_and_call_send_toolbroker_token_as_the_bearer() {
    let broker = Broker::builder()
        .server(demo("demo").set("prefix", "demo_"))
        .top(
            "auth",
            serde_json::json!({"tokens": [{"name": "alice", "value_env": "ALICE_TOKEN"}]}),
        )
        .env("ALICE_TOKEN", "alice-secret")
        .start()
        .await;
    broker.wait_ready().await;

    let listed = client(&["tools"], broker.addr, Some("alice-secret"));
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{listed:?}");
    assert!(stdout.contains("demo_echo("), "{stdout}");
    let called = client(
        &["call", "demo_echo", r#"{"message":"hi there"}"#],
        broker.addr,
        Some("alice-secret"),
    );
    assert!(called.status.success(), "{called:?}");
    assert!(String::from_utf8_lossy(&called.stdout).contains("hi there"));

    for token in [None, Some("wrong")] {
        let refused = client(&["tools"], broker.addr, token);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success());
        assert!(stderr.contains("Unauthenticated"), "{stderr}");
    }
}

#[test]
fn check_refuses_an_audit_file_that_cannot_be_written_and_malformed_rates() {
    let (_dir, path) = write_config(
        "audit: { file: /nonexistent-dir/audit.jsonl }\nlimits: { caller_rate: 5/day }\nservers:\n  - name: a\n    command: x\n    rate: lots\n",
    );
    let output = run_with_config(&["check", "--config"], &path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for field in ["limits.caller_rate", "servers[0] (a).rate"] {
        assert!(stderr.contains(field), "{field}: {stderr}");
    }
    // Files are read once the config itself is valid.
    let (_dir, path) = write_config(
        "audit: { file: /nonexistent-dir/audit.jsonl }\nservers:\n  - name: a\n    command: x\n",
    );
    let output = run_with_config(&["check", "--config"], &path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("audit.file") && stderr.contains("/nonexistent-dir is not a directory"),
        "{stderr}"
    );
}

#[tokio::test]
async fn call_stream_shows_progress_and_answers_questions_as_told() {
    let broker = Broker::builder().server(demo("demo")).start().await;
    broker.wait_ready().await;
    let run = |args: &[&str]| {
        let output = client(args, broker.addr, None);
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (
            output.status.success(),
            text(&output.stdout),
            text(&output.stderr),
        )
    };
    let (ok, stdout, stderr) = run(&["call", "sleep", r#"{"ms": 300, "steps": 3}"#, "--stream"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "slept 300 ms");
    assert!(
        stderr.contains("progress 3/3: slept 300 of 300 ms"),
        "{stderr}"
    );

    let ask = ["call", "ask", r#"{"question": "Colour?"}"#, "--stream"];
    let (ok, stdout, stderr) = run(&[&ask[..], &["--answer", r#"{"answer": "red"}"#]].concat());
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "the user answered: red");
    assert!(
        stderr.contains("the server asks: Colour? (accept)"),
        "{stderr}"
    );
    let (ok, stdout, _) = run(&ask);
    assert!(ok);
    assert_eq!(stdout.trim(), "the user declined to answer");
    let (ok, _, stderr) = run(&["call", "ask", "{}", "--answer", "{}"]);
    assert!(
        !ok && stderr.contains("--stream"),
        "--answer needs --stream: {stderr}"
    );
}

#[tokio::test]
async fn the_client_reaches_an_https_broker_trusting_the_ca_it_is_given() {
    let ca = common::certs::Ca::new();
    let server = ca.issue(&["localhost"]);
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, pem: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path.display().to_string()
    };
    let tls = serde_json::json!({
        "cert": write("tls.crt", &server.cert),
        "key": write("tls.key", &server.key),
    });
    let ca_file = write("ca.pem", &ca.pem);
    let trust = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&ca.pem))
        .domain_name("localhost");
    let broker = Broker::builder()
        .top("tls", tls)
        .server(demo("demo"))
        .tls(trust)
        .start()
        .await;
    broker.wait_ready().await;
    let addr = format!("https://localhost:{}", broker.addr.port());
    let call = |ca: Option<&str>| {
        let mut command = StdCommand::new(toolbroker_bin());
        command
            .args(["call", "echo", r#"{"message":"over tls"}"#, "--addr", &addr])
            .env_remove("TOOLBROKER_CA_CERT");
        if let Some(ca) = ca {
            command.args(["--ca-cert", ca]);
        }
        command.output().expect("run toolbroker")
    };
    let trusted = call(Some(&ca_file));
    assert!(trusted.status.success(), "{trusted:?}");
    assert!(String::from_utf8_lossy(&trusted.stdout).contains("over tls"));
    // The system's roots do not know the test CA.
    let untrusted = call(None);
    assert!(!untrusted.status.success(), "{untrusted:?}");
}

#[tokio::test]
async fn a_reader_that_stops_reading_is_no_error() {
    let broker = Broker::builder().server(demo("demo")).start().await;
    broker.wait_ready().await;
    for args in [
        vec!["tools"],
        vec!["call", "echo", r#"{"message": "unread"}"#],
    ] {
        // As `toolbroker tools | head -0` does: the pipe's reader is gone before a line is
        // written.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let ran = StdCommand::new(toolbroker_bin())
            .args(&args)
            .args(["--addr", &format!("http://{}", broker.addr)])
            .stdout(writer)
            .output()
            .expect("run toolbroker");
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert!(ran.status.success(), "{args:?}: {ran:?}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn search_and_tools_of_a_view_print_the_matching_tools() {
    let broker = Broker::builder()
        .top("views", serde_json::json!({"math": ["add", "sum"]}))
        .server(demo("demo"))
        .start()
        .await;
    broker.wait_ready().await;
    let addr = format!("http://{}", broker.addr);
    let toolbroker = |args: &[&str]| {
        StdCommand::new(toolbroker_bin())
            .args(args)
            .args(["--addr", &addr])
            .output()
            .expect("run toolbroker")
    };
    let found = toolbroker(&["search", "add two integers", "--limit", "2"]);
    assert!(found.status.success(), "{found:?}");
    let stdout = String::from_utf8_lossy(&found.stdout);
    assert!(
        stdout.starts_with("add(a: integer, b: integer)  [demo]"),
        "{stdout}"
    );

    let math = toolbroker(&["tools", "--view", "math"]);
    let stdout = String::from_utf8_lossy(&math.stdout);
    assert!(
        math.status.success() && stdout.starts_with("add("),
        "{math:?}"
    );
    assert_eq!(
        stdout.lines().filter(|l| !l.starts_with(' ')).count(),
        1,
        "{stdout}"
    );

    let unknown = toolbroker(&["tools", "--view", "nope"]);
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("unknown view \"nope\""),
        "{unknown:?}"
    );
}
