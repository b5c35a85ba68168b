//! MCP servers that tests start themselves: our demo server and server-everything over HTTP, and
//! a plain HTTP server that is not MCP at all. Each binds port 0 itself and is waited for by the
//! line of its output that names the port it got.

use std::{net::SocketAddr, process::Stdio, time::Duration};

use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    sync::watch,
};

use super::{WAIT, everything_js, repo, toolbroker_bin};

/// An MCP server process listening on HTTP.
pub struct HttpServer {
    child: Child,
    output: watch::Receiver<Vec<String>>,
    /// The URL to configure (`/mcp` or `/sse`).
    pub url: String,
    args: Vec<String>,
}

impl HttpServer {
    /// Our demo server: `transport` is `streamable-http` or `sse`.
    pub async fn demo(transport: &str, bearer: Option<&str>) -> HttpServer {
        let mut args = vec![
            "demo-server".to_string(),
            "--log-format".into(),
            "json".into(),
            "--transport".into(),
            transport.into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
        ];
        if let Some(token) = bearer {
            args.extend(["--bearer-token".into(), token.into()]);
        }
        Self::start_demo(args).await
    }

    async fn start_demo(args: Vec<String>) -> HttpServer {
        let (child, output) = spawn(toolbroker_bin(), &args, &[]);
        let mut server = HttpServer {
            child,
            output,
            url: String::new(),
            args,
        };
        let line = server.wait_for_line(|l| l.contains("\"listening\"")).await;
        let json: serde_json::Value = serde_json::from_str(&line).expect("a JSON log line");
        server.url = json["url"].as_str().expect("url field").to_owned();
        server
    }

    /// server-everything in `mode` (`sse` or `streamableHttp`), on the port the kernel picked for
    /// its `PORT=0`: it prints the port it was given, so a preloaded script prints the bound one.
    pub async fn everything(mode: &str) -> HttpServer {
        const BOUND: &str = "report-port: listening on port ";
        let args = vec![
            "--require".to_string(),
            repo()
                .join("tests/npm/report-port.cjs")
                .display()
                .to_string(),
            everything_js().display().to_string(),
            mode.to_string(),
        ];
        let (child, output) = spawn("node", &args, &[("PORT".to_string(), "0".to_string())]);
        let mut server = HttpServer {
            child,
            output,
            url: String::new(),
            args: Vec::new(),
        };
        let line = server.wait_for_line(|l| l.starts_with(BOUND)).await;
        let port: u16 = line[BOUND.len()..].parse().expect("a port number");
        let path = if mode == "sse" { "sse" } else { "mcp" };
        server.url = format!("http://127.0.0.1:{port}/{path}");
        server
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        let authority = self.url.trim_start_matches("http://");
        authority[..authority.find('/').unwrap()].parse().unwrap()
    }

    /// Kills the process at once (SIGKILL), as a crash would.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("kill the server");
    }

    /// Stops the process politely (SIGTERM) and waits for it.
    pub async fn stop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id().expect("running") as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the server exits after SIGTERM")
            .expect("wait");
    }

    /// Starts a new demo server process on the same address: it knows none of the old sessions.
    pub async fn restart(&mut self) {
        assert!(!self.args.is_empty(), "restart is for our demo server");
        let addr = self.addr().to_string();
        let args = self
            .args
            .iter()
            .map(|a| {
                if a == "127.0.0.1:0" {
                    addr.clone()
                } else {
                    a.clone()
                }
            })
            .collect();
        *self = Self::start_demo(args).await;
    }

    /// Whether any output line so far satisfies `matches`.
    pub fn printed(&self, matches: impl Fn(&str) -> bool) -> bool {
        self.output.borrow().iter().any(|l| matches(l))
    }

    /// Waits until an output line (stdout or stderr) satisfies `matches`, and returns it.
    pub async fn wait_for_line(&mut self, matches: impl Fn(&str) -> bool) -> String {
        let found = tokio::time::timeout(
            Duration::from_secs(30),
            self.output
                .wait_for(|lines| lines.iter().any(|l| matches(l))),
        )
        .await
        .expect("the server printed the expected line in time")
        .expect("the output reader is alive");
        found
            .iter()
            .find(|l| matches(l))
            .cloned()
            .expect("just matched")
    }
}

/// Spawns a server, collecting its stdout and stderr lines as they come.
fn spawn(
    program: &str,
    args: &[String],
    envs: &[(String, String)],
) -> (Child, watch::Receiver<Vec<String>>) {
    let mut child = Command::new(program)
        .args(args)
        .envs(envs.iter().cloned())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
    let (tx, rx) = watch::channel(Vec::new());
    let tx = std::sync::Arc::new(tx);
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    tokio::spawn(collect(stdout, tx.clone()));
    tokio::spawn(collect(stderr, tx));
    (child, rx)
}

async fn collect(
    pipe: impl tokio::io::AsyncRead + Unpin,
    tx: std::sync::Arc<watch::Sender<Vec<String>>>,
) {
    let mut lines = BufReader::new(pipe).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tx.send_modify(|all| all.push(line));
    }
}

/// A 127.0.0.1 address that refuses connections while the returned socket lives: the socket is
/// bound there but never listens, so the port stays ours and a connection to it is reset.
pub fn refusing() -> (SocketAddr, tokio::net::TcpSocket) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(([127, 0, 0, 1], 0).into()).unwrap();
    (socket.local_addr().unwrap(), socket)
}

/// A plain HTTP server that answers 404 to everything: not an MCP server.
pub async fn not_mcp() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new()
        .fallback(|| async { (axum::http::StatusCode::NOT_FOUND, "no such page") });
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}/mcp")
}

/// A TLS front for `backend` on 127.0.0.1, with a certificate for `localhost` issued by a fresh
/// private CA. Returns the port and the CA certificate (PEM), which clients must trust.
pub async fn tls_proxy(backend: SocketAddr) -> (u16, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    use tokio_rustls::rustls;

    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();

    let _ = rustls::crypto::ring::default_provider().install_default();
    let private_key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], private_key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (port, ca_cert.pem())
}
