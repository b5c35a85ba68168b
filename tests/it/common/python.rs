//! MCP servers written with the Python `mcp` SDK (pinned in tests/requirements.txt, installed
//! into .venv on first use): `tests/python/oauth_mcp_server.py`, an OAuth-protected server whose
//! tokens come from an [`OAuthServer`] of the test.

use std::{path::PathBuf, process::Stdio, sync::Arc};

use sha2::Digest as _;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    sync::watch,
};

use super::{STARTUP, install_once, oauth_server::OAuthServer, repo};

/// The Python of .venv, with every package of tests/requirements.txt installed.
pub fn python() -> PathBuf {
    let venv = repo().join(".venv");
    let requirements = repo().join("tests/requirements.txt");
    let pinned = std::fs::read(&requirements).expect("read tests/requirements.txt");
    let digest = sha2::Sha256::digest(&pinned);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    // The marker names the requirements it was made for: changing them installs again.
    let marker = venv.join(format!(".requirements-{hex}"));
    install_once(&marker, "python3", |command| {
        command.arg("-c").arg(format!(
            "import pathlib, subprocess, sys, venv; \
             pathlib.Path({v:?}, 'bin/python').exists() or venv.create({v:?}, with_pip=True, symlinks=True); \
             code = subprocess.call([{v:?} + '/bin/pip', 'install', '-q', '-r', {r:?}]); \
             code == 0 and pathlib.Path({m:?}).touch(); sys.exit(code)",
            v = venv.display().to_string(),
            r = requirements.display().to_string(),
            m = marker.display().to_string(),
        ))
    });
    venv.join("bin/python")
}

/// Runs `tests/python/<script>` with `args` to its end (at most two minutes): the one JSON
/// line it printed.
pub async fn run_script(script: &str, args: &[&str]) -> serde_json::Value {
    let run = Command::new(python())
        .arg(repo().join("tests/python").join(script))
        .args(args)
        .kill_on_drop(true)
        .output();
    let ran = tokio::time::timeout(std::time::Duration::from_secs(120), run)
        .await
        .unwrap_or_else(|_| panic!("{script} finished in time"))
        .unwrap();
    let output = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    serde_json::from_str(output.trim()).unwrap_or_else(|e| panic!("{script}: {e}: {output}"))
}

/// `tests/python/oauth_mcp_server.py`: streamable HTTP at `/mcp` on 127.0.0.1, a resource
/// server of an authorization server (tokens checked by introspection, bound to its URL as
/// audience). Tools `echo(text)`, `whoami()` (JSON: client_id, scopes, subject, resource),
/// `admin_action()` (403 `insufficient_scope` without scope `admin`). Killed on drop.
pub struct OAuthMcpServer {
    _child: Child,
    /// Its MCP endpoint, `http://127.0.0.1:PORT/mcp`: also its resource indicator (RFC 8707)
    /// and the `resource` of its protected-resource metadata.
    pub url: String,
}

impl OAuthMcpServer {
    /// Starts one protected by `oauth` (which then accepts tokens for its URL as a resource);
    /// every request needs a token with all of `required_scopes`.
    pub async fn protected_by(oauth: &OAuthServer, required_scopes: &[&str]) -> Self {
        let server = Self::start(
            &oauth.issuer,
            &oauth.introspection_endpoint(),
            required_scopes,
        )
        .await;
        oauth.add_resource(&server.url);
        server
    }

    /// Starts one naming `issuer` as its authorization server and checking tokens at
    /// `introspect`.
    pub async fn start(issuer: &str, introspect: &str, required_scopes: &[&str]) -> Self {
        let mut args = vec![
            "--port",
            "0",
            "--issuer",
            issuer,
            "--introspect",
            introspect,
        ];
        for scope in required_scopes {
            args.extend(["--required-scope", scope]);
        }
        let (child, url) = launch("tests/python/oauth_mcp_server.py", &args).await;
        Self { _child: child, url }
    }

    /// Its RFC 9728 protected-resource metadata URL (what its 401s point to).
    pub fn metadata_url(&self) -> String {
        let (origin, path) = self.url.split_at(self.url.find("/mcp").expect("/mcp"));
        format!("{origin}/.well-known/oauth-protected-resource{path}")
    }
}

async fn collect(pipe: impl tokio::io::AsyncRead + Unpin, tx: Arc<watch::Sender<Vec<String>>>) {
    let mut lines = BufReader::new(pipe).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tx.send_modify(|all| all.push(line));
    }
}

/// Starts a Python MCP server script of the repository that prints `{"listening": true, "url":
/// ...}` once it serves: the process and its URL.
async fn launch(script: &str, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(python())
        .arg(repo().join(script))
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the Python MCP server");
    let (tx, mut output) = watch::channel(Vec::new());
    let tx = Arc::new(tx);
    tokio::spawn(collect(child.stdout.take().expect("piped"), tx.clone()));
    tokio::spawn(collect(child.stderr.take().expect("piped"), tx));
    let listening = |l: &str| l.starts_with("{\"listening\"");
    let waited = tokio::time::timeout(
        STARTUP,
        output.wait_for(|all| all.iter().any(|l| listening(l))),
    )
    .await
    .unwrap_or_else(|_| panic!("the Python MCP server did not start within {STARTUP:?}"))
    .map(|lines| lines.iter().find(|l| listening(l)).cloned().unwrap());
    let Ok(line) = waited else {
        let status = child.wait().await;
        panic!(
            "the Python MCP server exited ({status:?}): {}",
            output.borrow().join("\n")
        );
    };
    let json: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    let url = json["url"].as_str().expect("url").to_owned();
    (child, url)
}

/// `tests/python/interactive_mcp_server.py` over streamable HTTP at `url` (progress,
/// elicitation, sampling, resources, prompts; see its docstring). Killed on drop.
pub struct InteractiveHttpServer {
    _child: Child,
    /// Its MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl InteractiveHttpServer {
    /// Starts one on a free port.
    pub async fn start() -> Self {
        let (child, url) = launch("tests/python/interactive_mcp_server.py", &["--http", "0"]).await;
        Self { _child: child, url }
    }

    /// `tests/python/modern_mcp_server.py` (2026-07-28 only) instead, on a free port.
    pub async fn modern() -> Self {
        let (child, url) = launch("tests/python/modern_mcp_server.py", &["--http", "0"]).await;
        Self { _child: child, url }
    }
}
