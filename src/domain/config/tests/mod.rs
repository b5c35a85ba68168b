//! Tests of config parsing: valid documents and the values they give. The error cases are
//! in [`errors`].

mod bounds;
mod callers;
mod connections;
mod errors;
mod oauth;
mod rates;
mod shaping;
mod state;
mod tasks;

use std::{collections::HashMap, net::SocketAddr, path::PathBuf, time::Duration};

use secrecy::ExposeSecret;

use super::{
    Backoff, Concurrency, Config, ConfigError, ConfigErrors, DEFAULT_INIT_TIMEOUT, DEFAULT_TIMEOUT,
    HttpMode, HttpSpec, Isolation, ServerSpec, StdioSpec, Templates, TransportSpec, parse,
};
use crate::domain::{
    caller::Template,
    names::ServerName,
    overrides::ToolRule,
    state::{Readiness, Transport},
};

/// The environment every test sees, through a HashMap, never the process's.
fn env() -> HashMap<&'static str, &'static str> {
    HashMap::from([
        ("API_KEY", "key-123-secret"),
        ("TOKEN", "tok-456-secret"),
        ("HOME", "/home/me"),
        ("EMPTY", ""),
        ("MULTILINE", "a\nb"),
    ])
}

pub(super) fn parse_with_env(text: &str) -> Result<Config, ConfigErrors> {
    let env = env();
    parse(text, &|name| env.get(name).map(|v| (*v).to_owned()))
}

fn ok(text: &str) -> Config {
    match parse_with_env(text) {
        Ok(config) => config,
        Err(errors) => panic!("config should be valid:\n{text}\nerrors:\n{errors}"),
    }
}

pub(super) fn errors(text: &str) -> Vec<ConfigError> {
    match parse_with_env(text) {
        Ok(config) => panic!("config should be invalid:\n{text}\nparsed: {config:?}"),
        Err(ConfigErrors(errors)) => errors,
    }
}

fn name(text: &str) -> ServerName {
    ServerName::parse(text).expect("valid test name")
}

fn secrets(pairs: &[(&str, &str)]) -> Templates {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Template::text(*v)))
        .collect()
}

fn stdio(command: &str, args: &[&str]) -> TransportSpec {
    TransportSpec::Stdio(StdioSpec {
        command: command.into(),
        args: args.iter().map(|a| Template::text(*a)).collect(),
        env: Templates::new(),
        cwd: None,
        inherit_env: false,
    })
}

fn spec(server: &str, transport: TransportSpec) -> ServerSpec {
    ServerSpec {
        name: name(server),
        transport,
        tools: vec![],
        prefix: String::new(),
        timeout: DEFAULT_TIMEOUT,
        max_timeout: DEFAULT_TIMEOUT * 10,
        roots: vec![],
        init_timeout: DEFAULT_INIT_TIMEOUT,
        backoff: Backoff::default(),
        concurrency: Concurrency::default(),
        max_result_bytes: 16 << 20,
        replicas: 1,
        isolation: Isolation::Shared,
        token_exchange: None,
        oauth: None,
        rate: None,
        caller_rate: None,
    }
}

const FULL: &str = r#"
listen: "0.0.0.0:50051"
metrics_listen: "0.0.0.0:9090"
unix_listen: "unix:${HOME}/grpc.sock"
readiness: all
servers:
  - name: everything
    transport: stdio
    command: npx
    args: ["-y", "@modelcontextprotocol/server-everything", "^a$", "$$HOME", 8080, true]
    env: { API_KEY: "${API_KEY}", PORT: 3000, MODE: "${MODE:-dev}" }
    cwd: ${HOME}/srv
    tools: [echo, add]
    prefix: "ev_"
    timeout: 1m30s
    init_timeout: 500ms
  - name: remote
    url: http://127.0.0.1:3001/mcp
    headers: { Authorization: "Bearer ${TOKEN}" }
    timeout: 10
    max_timeout: 2m
    roots: ["file:///srv/data"]
mcpServers:
  memory: { command: npx, args: ["-y", "@modelcontextprotocol/server-memory"] }
  legacy: { type: sse, url: "https://example.test/sse" }
"#;

#[test]
fn full_example_parses_to_concrete_values() {
    let config = ok(FULL);
    assert_eq!(
        config.listen,
        Some("0.0.0.0:50051".parse::<SocketAddr>().unwrap())
    );
    assert_eq!(
        config.metrics_listen,
        Some("0.0.0.0:9090".parse::<SocketAddr>().unwrap())
    );
    assert_eq!(
        config.unix_listen.as_deref(),
        Some(std::path::Path::new("/home/me/grpc.sock"))
    );
    assert_eq!(config.readiness, Readiness::All);
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["everything", "remote", "memory", "legacy"]);

    let everything = ServerSpec {
        transport: TransportSpec::Stdio(StdioSpec {
            command: "npx".into(),
            args: [
                "-y",
                "@modelcontextprotocol/server-everything",
                "^a$",
                "$HOME",
                "8080",
                "true",
            ]
            .map(Template::text)
            .to_vec(),
            env: secrets(&[
                ("API_KEY", "key-123-secret"),
                ("PORT", "3000"),
                ("MODE", "dev"),
            ]),
            cwd: Some(Template::text("/home/me/srv")),
            inherit_env: false,
        }),
        tools: vec![ToolRule::plain("echo"), ToolRule::plain("add")],
        prefix: "ev_".into(),
        timeout: Duration::from_secs(90),
        max_timeout: Duration::from_secs(900),
        init_timeout: Duration::from_millis(500),
        ..spec("everything", stdio("", &[]))
    };
    assert_eq!(config.servers[0], everything);

    let remote = ServerSpec {
        timeout: Duration::from_secs(10),
        max_timeout: Duration::from_secs(120),
        roots: vec!["file:///srv/data".into()],
        ..spec(
            "remote",
            TransportSpec::Http(HttpSpec {
                url: "http://127.0.0.1:3001/mcp".into(),
                mode: HttpMode::Auto,
                headers: secrets(&[("Authorization", "Bearer tok-456-secret")]),
            }),
        )
    };
    assert_eq!(config.servers[1], remote);
    let memory = stdio("npx", &["-y", "@modelcontextprotocol/server-memory"]);
    assert_eq!(config.servers[2], spec("memory", memory));
    assert_eq!(config.servers[3].transport.kind(), Transport::Sse);
}

#[test]
fn debug_output_hides_secrets() {
    let config = ok(FULL);
    let debug = format!("{config:?}");
    assert!(
        debug.contains("everything"),
        "debug shows the config: {debug}"
    );
    assert!(
        !debug.contains("key-123-secret"),
        "env value leaked: {debug}"
    );
    assert!(
        !debug.contains("tok-456-secret"),
        "header value leaked: {debug}"
    );
    assert!(!debug.contains("3000"), "env value leaked: {debug}");
}

#[test]
fn equality_compares_secret_values() {
    let a = ok("servers: [{name: a, command: x, env: {K: one}}]");
    let b = ok("servers: [{name: a, command: x, env: {K: two}}]");
    let c = ok("mcpServers: {a: {command: x, env: {K: one}}}");
    assert_ne!(a, b);
    assert_eq!(a, c);
    let h1 = ok("servers: [{name: a, url: 'http://h', headers: {A: '1', B: '2'}}]");
    let h2 = ok("servers: [{name: a, url: 'http://h', headers: {B: '2', A: '1'}}]");
    let h3 = ok("servers: [{name: a, url: 'http://h', headers: {A: '1', B: '3'}}]");
    assert_eq!(h1, h2, "header order does not matter");
    assert_ne!(h1, h3);
}

#[test]
fn list_and_map_forms_give_equal_specs() {
    let list = ok(r#"
servers:
  - name: memory
    command: npx
    args: ["-y", "@modelcontextprotocol/server-memory"]
    env: { A: "1" }
  - name: web
    transport: http
    url: http://localhost:8080/mcp
    prefix: w_
"#);
    let map = ok(r#"
mcpServers:
  memory: { command: npx, args: ["-y", "@modelcontextprotocol/server-memory"], env: { A: "1" } }
  web: { type: http, url: "http://localhost:8080/mcp", prefix: w_ }
"#);
    assert_eq!(list.servers.len(), 2);
    assert_eq!(list, map);
    assert_eq!(list.servers[1].transport.kind(), Transport::StreamableHttp);
}

#[test]
fn json_mcp_json_document_parses() {
    let config = ok(r#"{
  "mcpServers": {
    "filesystem": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
      "env": { "TOKEN": "${TOKEN}" }
    },
    "github": { "type": "http", "url": "https://api.example.test/mcp/" },
    "cline": { "type": "streamableHttp", "url": "https://cline.example.test/mcp" }
  }
}"#);
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["filesystem", "github", "cline"]);
    let TransportSpec::Stdio(fs) = &config.servers[0].transport else {
        panic!("filesystem should be stdio: {:?}", config.servers[0]);
    };
    assert_eq!(
        fs.args,
        ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
    );
    assert_eq!(fs.env["TOKEN"].as_written(), "tok-456-secret");
    assert_eq!(
        config.servers[1].transport.kind(),
        Transport::StreamableHttp
    );
    assert_eq!(
        config.servers[2].transport.kind(),
        Transport::StreamableHttp
    );
}

#[test]
fn servers_may_be_a_map_as_in_vs_code() {
    let config = ok("servers:\n  one: { type: stdio, command: a }\n  two: { command: b }\n");
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["one", "two"]);
}

#[test]
fn empty_documents_are_valid_with_no_servers() {
    for text in [
        "",
        "\n",
        "# only a comment\n",
        "{}",
        "~",
        "servers: []",
        "servers:\nmcpServers: {}",
    ] {
        let config = ok(text);
        assert_eq!(config, Config::default(), "text {text:?}");
        assert_eq!(config.readiness, Readiness::FirstAttempt);
        assert!(config.servers.is_empty());
    }
}

#[test]
fn defaults_are_applied() {
    let config = ok("servers: [{name: a, url: 'https://h/mcp'}]");
    let server = &config.servers[0];
    assert_eq!(server.timeout, Duration::from_secs(30));
    assert_eq!(server.init_timeout, Duration::from_secs(60));
    assert_eq!(server.prefix, "");
    assert!(server.tools.is_empty());
    assert_eq!(server.transport.kind(), Transport::Auto);
    assert_eq!(config.listen, None);
    assert_eq!(config.metrics_listen, None);
    assert_eq!(config.readiness, Readiness::FirstAttempt);
    assert_eq!(config.shutdown_grace, Duration::from_secs(10));
    assert_eq!(config.max_connection_age, None);
    assert_eq!(config.max_connection_age_grace, None);
    assert_eq!(
        (server.backoff.initial, server.backoff.max),
        (Duration::from_secs(1), Duration::from_secs(60))
    );
}

#[test]
fn backoff_and_shutdown_grace_are_read_and_checked() {
    let config = ok(
        "shutdown_grace: 3s\nservers: [{name: a, command: x, backoff_initial: 100ms, backoff_max: 2s}]",
    );
    assert_eq!(config.shutdown_grace, Duration::from_secs(3));
    let backoff = config.servers[0].backoff;
    assert_eq!(
        (backoff.initial, backoff.max),
        (Duration::from_millis(100), Duration::from_secs(2))
    );
}

#[test]
fn max_connection_age_is_read_and_checked() {
    let config = ok("max_connection_age: 5m\nmax_connection_age_grace: 30s\nservers: []");
    assert_eq!(config.max_connection_age, Some(Duration::from_secs(300)));
    assert_eq!(
        config.max_connection_age_grace,
        Some(Duration::from_secs(30))
    );
    let config = ok("max_connection_age: 90\nservers: []");
    assert_eq!(config.max_connection_age, Some(Duration::from_secs(90)));
    assert_eq!(config.max_connection_age_grace, None);
}

#[test]
fn durations_accept_humantime_and_whole_seconds() {
    let cases = [
        ("30s", Duration::from_secs(30)),
        ("1m30s", Duration::from_secs(90)),
        ("500ms", Duration::from_millis(500)),
        ("2h", Duration::from_secs(7200)),
        ("45", Duration::from_secs(45)),
        ("7", Duration::from_secs(7)),
        ("'7'", Duration::from_secs(7)),
    ];
    for (written, want) in cases {
        let config = ok(&format!(
            "mcpServers: {{a: {{command: x, timeout: {written}}}}}"
        ));
        assert_eq!(config.servers[0].timeout, want, "timeout: {written}");
    }
}

#[test]
fn expansion_applies_to_every_expanded_field() {
    let config = ok(r#"
listen: "127.0.0.1:${PORT:-6000}"
servers:
  - name: a
    command: ${BIN:-/usr/bin/tool}
    args: ["${HOME}", "${EMPTY:-fallback}", "${EMPTY-kept-empty}", "cost: 5$", "$${NOT_EXPANDED}"]
    env: { K: "${MISSING:-default value}" }
    cwd: "${HOME}"
  - name: b
    url: "https://h/${EMPTY:-mcp}"
    headers: { X-Key: "${API_KEY}" }
"#);
    assert_eq!(config.listen, Some("127.0.0.1:6000".parse().unwrap()));
    let TransportSpec::Stdio(a) = &config.servers[0].transport else {
        panic!("a should be stdio");
    };
    assert_eq!(a.command, "/usr/bin/tool");
    assert_eq!(
        a.args,
        ["/home/me", "fallback", "", "cost: 5$", "${NOT_EXPANDED}"]
    );
    assert_eq!(a.env["K"].as_written(), "default value");
    assert_eq!(a.cwd, Some(Template::text("/home/me")));
    let TransportSpec::Http(b) = &config.servers[1].transport else {
        panic!("b should be http");
    };
    assert_eq!(b.url, "https://h/mcp");
    assert_eq!(b.headers["X-Key"].as_written(), "key-123-secret");
}

#[test]
fn environment_comes_only_from_the_lookup() {
    // PATH is set in any test process; the lookup says it is not, and that is what counts.
    let lookup = |name: &str| (name == "ONLY").then(|| "from-lookup".to_owned());
    let config = parse("servers: [{name: a, command: '${ONLY}'}]", &lookup).expect("valid");
    assert_eq!(config.servers[0].transport, stdio("from-lookup", &[]));
    let errors = parse("servers: [{name: a, command: '${PATH}'}]", &lookup).expect_err("unset");
    assert_eq!(errors.0.len(), 1);
    assert_eq!(errors.0[0].path, "servers[0] (a).command");
    assert!(
        errors.0[0].reason.contains("PATH is not set"),
        "{}",
        errors.0[0]
    );
}

#[test]
fn yaml_anchors_and_merge_keys_work() {
    let config = ok(r#"
servers:
  - &base { name: a, command: npx, timeout: 5s }
  - { <<: *base, name: b }
"#);
    assert_eq!(config.servers[1].timeout, Duration::from_secs(5));
    assert_eq!(config.servers[1].transport, stdio("npx", &[]));
}

#[test]
fn transport_names() {
    let http = |mode| {
        TransportSpec::Http(HttpSpec {
            url: "http://h".into(),
            mode,
            headers: Templates::new(),
        })
    };
    assert_eq!(stdio("x", &[]).kind(), Transport::Stdio);
    assert_eq!(http(HttpMode::Auto).kind(), Transport::Auto);
    assert_eq!(
        http(HttpMode::StreamableHttp).kind(),
        Transport::StreamableHttp
    );
    assert_eq!(http(HttpMode::Sse).kind(), Transport::Sse);
}

#[test]
fn security_sections_are_read() {
    let config = ok(r#"
auth:
  tokens:
    - { name: agent-a, value_env: TOKEN, tools: ["fs_read_*", echo] }
    - { value_file: /run/secrets/b }
  client_ca: /etc/ca.pem
tls: { cert: /etc/tls.crt, key: /etc/tls.key }
reflection: false
limits: { max_request_bytes: 1MiB, max_response_bytes: 2048, max_result_bytes: "64 KiB" }
servers: [{name: a, command: x, max_concurrent_calls: 2, max_queued_calls: 0, queue_timeout: 250ms, inherit_env: true, replicas: 4}]
"#);
    let tokens = &config.auth.tokens;
    assert_eq!(tokens[0].name, "agent-a");
    assert!(
        matches!(&tokens[0].source, crate::domain::config::TokenSource::Value(v) if v.expose_secret() == "tok-456-secret")
    );
    assert_eq!(tokens[0].tools, ["fs_read_*", "echo"]);
    assert_eq!(tokens[1].name, "auth.tokens[1]");
    assert!(
        matches!(&tokens[1].source, crate::domain::config::TokenSource::File(p) if p == &PathBuf::from("/run/secrets/b"))
    );
    assert_eq!(config.auth.client_ca, Some(PathBuf::from("/etc/ca.pem")));
    assert_eq!(config.tls.unwrap().key, PathBuf::from("/etc/tls.key"));
    assert!(!config.reflection);
    assert_eq!(
        (
            config.limits.max_request_bytes,
            config.limits.max_response_bytes,
            config.limits.max_result_bytes
        ),
        (1 << 20, 2048, 64 * 1024)
    );
    let server = &config.servers[0];
    assert_eq!(
        (server.concurrency.max_calls, server.concurrency.max_queued),
        (2, 0)
    );
    assert_eq!(server.concurrency.queue_timeout, Duration::from_millis(250));
    assert!(matches!(&server.transport, TransportSpec::Stdio(s) if s.inherit_env));
    assert_eq!(server.replicas, 4);
    let defaults = ok("servers: []");
    assert!(defaults.reflection && !defaults.auth.enabled() && defaults.tls.is_none());
    assert_eq!(defaults.limits.max_request_bytes, 4 << 20);
}
