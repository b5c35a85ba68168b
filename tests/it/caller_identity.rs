//! Every caller is one principal: a client certificate names its caller by its SAN (SPIFFE
//! URI, DNS, email) or CN and one naming nothing is refused; a caller is its kind and its id,
//! so a static token `alice` and a JWT for `alice` never share a process or a file; ids that a
//! lossy rendering would merge (`李雷`/`王芳`, `a/b`/`a_b`) stay apart; a caller's header never
//! lands in a command line as an option; and `${caller.token}` never lands in one at all.

use std::path::Path;

use crate::common::{
    self, Broker, Server, WAIT, as_caller, call_request,
    certs::Ca,
    demo,
    issuer::{AUDIENCE, ISSUER, Key, jwks_file},
    memory,
};
use rcgen::SanType;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tonic::{
    Code,
    transport::{Certificate, Channel, ClientTlsConfig, Identity},
};
use toolbroker::proto::tool_broker_client::ToolBrokerClient;

/// A rendered id or value as the README documents it: the readable part, `~`, and the first
/// 16 hex digits of SHA-256(tag, NUL, value) (computed here, not by the broker's code).
fn digested(readable: &str, tag: &str, value: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(tag.as_bytes());
    hash.update([0]);
    hash.update(value.as_bytes());
    let hex: String = hash.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{readable}~{hex}")
}

/// The demo over stdio, one process per caller, its `--tag` the caller's id.
fn per_caller_demo() -> Server {
    demo("demo")
        .set("isolation", "per-caller")
        .args(["--tag", "${caller.id}"])
}

/// `whoami` over `client` (as `token`, with `headers`), asking for the variables `env`.
async fn whoami(
    client: &ToolBrokerClient<Channel>,
    token: Option<&str>,
    headers: &[(&'static str, &str)],
    env: &[&str],
) -> Result<Value, tonic::Status> {
    let arguments = json!({ "env": env }).to_string();
    let request = as_caller(token, headers, call_request("whoami", &arguments));
    let answer = tokio::time::timeout(WAIT, client.clone().call_tool(request))
        .await
        .expect("answered in time")?
        .into_inner();
    assert!(!answer.is_error, "{answer:?}");
    Ok(serde_json::from_str(&answer.text).expect("whoami answers JSON"))
}

/// The audit file's lines of successful calls, as (caller, caller_kind).
fn audited(path: &Path) -> Vec<(String, String)> {
    let text = |value: &Value| value.as_str().expect("a string").to_owned();
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| line["code"] == "OK")
        .map(|line| (text(&line["caller"]), text(&line["caller_kind"])))
        .collect()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[tokio::test]
async fn mtls_callers_are_named_by_their_san_or_cn_and_a_nameless_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, clients) = (Ca::new(), Ca::new());
    let server = ca.issue(&["localhost"]);
    let uri = |text: &str| SanType::URI(text.try_into().unwrap());
    let spiffe = [
        "spiffe://example.org/ns/prod/sa/billing",
        "spiffe://example.org/ns/prod/sa/payroll",
    ];
    // Each certificate, the id it names, and the `${caller.id}` it renders to.
    let named = [
        (
            clients.issue_identity(vec![uri(spiffe[0])], None),
            spiffe[0].to_owned(),
            digested("spiffe_example.org_ns_prod_sa_billing", "cert", spiffe[0]),
        ),
        (
            clients.issue_identity(vec![uri(spiffe[1])], None),
            spiffe[1].to_owned(),
            digested("spiffe_example.org_ns_prod_sa_payroll", "cert", spiffe[1]),
        ),
        (
            clients.issue_identity(
                vec![SanType::DnsName("agent.example.org".try_into().unwrap())],
                None,
            ),
            "agent.example.org".into(),
            "agent.example.org".into(),
        ),
        (
            clients.issue_identity(
                vec![SanType::Rfc822Name("ops@example.org".try_into().unwrap())],
                None,
            ),
            "ops@example.org".into(),
            "ops@example.org".into(),
        ),
        (
            clients.issue_identity(vec![], Some("agent-7")),
            "agent-7".into(),
            "agent-7".into(),
        ),
    ];
    let nameless = clients.issue_identity(vec![], None);
    let audit = dir.path().join("audit.jsonl");
    let trust = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&ca.pem))
        .domain_name("localhost");
    let with = |issued: &common::certs::Issued| {
        trust
            .clone()
            .identity(Identity::from_pem(&issued.cert, &issued.key))
    };
    let broker = Broker::builder()
        .top(
            "tls",
            json!({
                "cert": write(dir.path(), "tls.crt", &server.cert),
                "key": write(dir.path(), "tls.key", &server.key),
            }),
        )
        .top(
            "auth",
            json!({"client_ca": write(dir.path(), "clients.pem", &clients.pem)}),
        )
        .top("audit", json!({"file": audit.display().to_string()}))
        .server(per_caller_demo())
        .tls(with(&named[0].0))
        .start()
        .await;
    common::wait_health(broker.channel.clone(), "toolbroker.v1.ToolBroker").await;
    let client = |tls: ClientTlsConfig| async move {
        let url = format!("https://localhost:{}", broker.addr.port());
        let channel = Channel::from_shared(url).unwrap().tls_config(tls).unwrap();
        ToolBrokerClient::new(channel.connect().await.unwrap())
    };

    let mut pids = std::collections::HashSet::new();
    for (issued, _, rendered) in &named {
        let report = whoami(&client(with(issued)).await, None, &[], &[])
            .await
            .unwrap();
        assert_eq!(report["args"], json!(["demo-server", "--tag", rendered]));
        pids.insert(report["pid"].as_u64().unwrap());
    }
    assert_eq!(pids.len(), named.len(), "a process per certificate");

    let refused = whoami(&client(with(&nameless)).await, None, &[], &[])
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert_eq!(
        refused.message(),
        "the client certificate names no identity"
    );

    let want: Vec<(String, String)> = named
        .iter()
        .map(|(_, id, _)| (id.clone(), "cert".to_owned()))
        .collect();
    assert_eq!(audited(&audit), want);
}

/// `auth` with static tokens (`TOKEN_<i>` holds `token-<i>`) named `names`, and `extra`
/// settings; the environment the broker needs for them.
fn tokens(names: &[&str], extra: Value) -> (Value, Vec<(String, String)>) {
    let tokens: Vec<Value> = names
        .iter()
        .enumerate()
        .map(|(i, name)| json!({"name": name, "value_env": format!("TOKEN_{i}")}))
        .collect();
    let env = (0..names.len())
        .map(|i| (format!("TOKEN_{i}"), format!("token-{i}")))
        .collect();
    let mut auth = json!({ "tokens": tokens });
    auth.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    (auth, env)
}

async fn start(auth: (Value, Vec<(String, String)>), server: Server, audit: &Path) -> Broker {
    let mut builder = Broker::builder()
        .top("auth", auth.0)
        .top("audit", json!({"file": audit.display().to_string()}))
        .server(server);
    for (key, value) in &auth.1 {
        builder = builder.env(key, value);
    }
    let broker = builder.start().await;
    common::wait_health(broker.channel.clone(), "toolbroker.v1.ToolBroker").await;
    broker
}

#[tokio::test]
async fn a_static_token_and_a_jwt_with_the_same_id_keep_separate_memory_files() {
    let dir = tempfile::tempdir().unwrap();
    let key = Key::generate("k1");
    let jwt = json!({"jwt": {
        "issuer": ISSUER,
        "audience": AUDIENCE,
        "jwks_file": jwks_file(dir.path(), &[&key]),
    }});
    let files = dir.path().join("memory");
    std::fs::create_dir(&files).unwrap();
    let server = memory("memory").set("isolation", "per-caller").set(
        "env",
        json!({"MEMORY_FILE_PATH": format!("{}/${{caller.id}}.json", files.display())}),
    );
    let audit = dir.path().join("audit.jsonl");
    let broker = start(tokens(&["alice"], jwt), server, &audit).await;
    let (token_alice, jwt_alice) = ("token-0".to_owned(), key.token("alice", json!({})));

    let remember = |token: &str, secret: &str| {
        let entity = json!({"entities": [
            {"name": secret, "entityType": "note", "observations": ["mine"]}
        ]});
        let request = as_caller(
            Some(token),
            &[],
            call_request("create_entities", &entity.to_string()),
        );
        let mut client = broker.client.clone();
        async move { client.call_tool(request).await.unwrap().into_inner() }
    };
    let graph = |token: &str| {
        let request = as_caller(Some(token), &[], call_request("read_graph", "{}"));
        let mut client = broker.client.clone();
        async move { client.call_tool(request).await.unwrap().into_inner().text }
    };
    assert!(!remember(&token_alice, "token-alice-secret").await.is_error);
    assert!(!remember(&jwt_alice, "jwt-alice-secret").await.is_error);
    let (as_token, as_jwt) = (graph(&token_alice).await, graph(&jwt_alice).await);
    assert!(as_token.contains("token-alice-secret") && !as_token.contains("jwt-alice-secret"));
    assert!(as_jwt.contains("jwt-alice-secret") && !as_jwt.contains("token-alice-secret"));

    // Tokens come first in `auth`: the token's plain id is its file name; the JWT's has its
    // kind and a digest.
    let jwt_file = format!("{}.json", digested("jwt.alice", "jwt", "alice"));
    for (file, secret) in [
        ("alice.json", "token-alice-secret"),
        (jwt_file.as_str(), "jwt-alice-secret"),
    ] {
        let text = std::fs::read_to_string(files.join(file)).unwrap();
        assert!(text.contains(secret), "{file}: {text}");
    }
    let kinds: std::collections::BTreeSet<_> = audited(&audit).into_iter().collect();
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        [
            ("alice".into(), "jwt".into()),
            ("alice".into(), "token".into())
        ]
    );
}

#[tokio::test]
async fn ids_a_lossy_rendering_would_merge_get_their_own_processes_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["李雷", "王芳", "a/b", "a_b"];
    let server = per_caller_demo().set(
        "env",
        json!({"MEMORY_FILE_PATH": "/data/${caller.id}.json"}),
    );
    let broker = start(
        tokens(&names, json!({})),
        server,
        &dir.path().join("a.jsonl"),
    )
    .await;
    let want = [
        digested("Li_Lei", "token", "李雷"),
        digested("Wang_Fang", "token", "王芳"),
        digested("a_b", "token", "a/b"),
        "a_b".to_owned(),
    ];
    let mut pids = std::collections::HashSet::new();
    for (i, rendered) in want.iter().enumerate() {
        let token = format!("token-{i}");
        let report = whoami(&broker.client, Some(&token), &[], &["MEMORY_FILE_PATH"])
            .await
            .unwrap();
        let file = format!("/data/{rendered}.json");
        assert_eq!(report["env"]["MEMORY_FILE_PATH"], file, "{}", names[i]);
        pids.insert(report["pid"].as_u64().unwrap());
    }
    assert_eq!(pids.len(), names.len(), "a process per caller");
}

#[tokio::test]
async fn a_callers_header_never_reaches_a_command_line_as_an_option() {
    let dir = tempfile::tempdir().unwrap();
    let server = demo("demo")
        .set("isolation", "per-caller")
        .args(["--tag", "${caller.header.x-extra}"])
        .set("discovery", json!({"headers": {"x-extra": "discovery"}}));
    let broker = start(
        tokens(&["mallory"], json!({})),
        server,
        &dir.path().join("a.jsonl"),
    )
    .await;
    for (sent, landed) in [
        ("--serial", digested("serial", "value", "--serial")),
        ("-", digested("_", "value", "-")),
        ("blue", "blue".to_owned()),
    ] {
        let report = whoami(&broker.client, Some("token-0"), &[("x-extra", sent)], &[])
            .await
            .unwrap();
        assert_eq!(report["args"], json!(["demo-server", "--tag", landed]));
    }
}

#[test]
fn check_refuses_a_callers_token_in_args_and_keeps_it_in_env_and_headers() {
    let dir = tempfile::tempdir().unwrap();
    let config = |server: &str| {
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, format!("servers:\n  - {server}\n")).unwrap();
        common::run_with_config(&["check", "--config"], &path)
    };
    let refused = config(
        "{name: gh, command: gh-mcp, isolation: per-caller, \
         args: ['--verbose', '--token=${caller.token}']}",
    );
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("servers[0] (gh).args[1]")
            && stderr.contains("${caller.token} may not be in args"),
        "{stderr}"
    );
    for allowed in [
        "{name: gh, command: gh-mcp, isolation: per-caller, env: {GH_TOKEN: '${caller.token}'}}",
        "{name: gh, url: 'http://127.0.0.1:1/mcp', isolation: per-caller, \
         headers: {Authorization: 'Bearer ${caller.token}'}}",
    ] {
        let output = config(allowed);
        assert!(output.status.success(), "{allowed}: {output:?}");
    }
}
