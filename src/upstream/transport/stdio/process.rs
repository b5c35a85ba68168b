//! Child processes of stdio servers: each in its own process group, its stderr logged line by
//! line under the server's name, stopped politely then firmly, and never left behind.

use std::{
    collections::VecDeque,
    process::{ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use nix::{
    sys::signal::{Signal, killpg},
    unistd::Pid,
};
use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
use secrecy::ExposeSecret;
use tokio::{
    process::{ChildStderr, ChildStdin, ChildStdout},
    task::JoinHandle,
};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

use crate::domain::{
    config::Launch,
    names::ServerName,
    outcome::{ProcessExit, StartFailure, StreamFault},
};
use crate::upstream::{
    transport::faults::Verdict, transport::stdio::spawner,
    transport::stdio::stdout_guard::StdoutGuard,
};

/// The stderr reader's first buffer.
const STDERR_FIRST_READ: usize = 256;
/// Longest stderr line logged whole; longer ones are cut.
const MAX_STDERR_LINE: usize = 8 * 1024;
/// How many of the last stderr lines are kept to explain a failure, and how much of each.
const TAIL_LINES: usize = 5;
const TAIL_LINE_CHARS: usize = 240;
/// How long the stderr reader may take to log the last lines after the process ended.
const STDERR_DRAIN: Duration = Duration::from_millis(500);
/// How long a server gets to exit by itself once its stdin is closed, and again after SIGTERM.
pub const STOP_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for an exit status to explain a failure.
pub const EXIT_REPORT_WAIT: Duration = Duration::from_millis(500);

/// The pipes the MCP session speaks over.
pub struct Pipes {
    /// The server's stdout: JSON-RPC from the server, guarded against anything else.
    pub stdout: StdoutGuard<ChildStdout>,
    /// The server's stdin: JSON-RPC to the server.
    pub stdin: ChildStdin,
}

/// The last few stderr lines of a server, to explain why it failed.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, mut line: String) {
        if let Some((cut, _)) = line.char_indices().nth(TAIL_LINE_CHARS) {
            line.truncate(cut);
            line.push('…');
        }
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The kept lines joined with " | ", or `None` if the server wrote nothing.
    pub fn summary(&self) -> Option<String> {
        let lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let kept: Vec<&str> = lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect();
        (!kept.is_empty()).then(|| kept.join(" | "))
    }
}

/// A running stdio server process (the leader of its own process group).
pub struct ChildProcess {
    child: Box<dyn ChildWrapper>,
    group: Option<Pid>,
    stderr: Option<JoinHandle<()>>,
    tail: StderrTail,
    verdict: Verdict,
    exited: Option<ProcessExit>,
}

/// Starts the server's command with its pipes; stderr is logged from now on.
pub fn spawn(
    server: &ServerName,
    spec: &Launch,
    max_line: usize,
) -> Result<(ChildProcess, Pipes), StartFailure> {
    let mut command = tokio::process::Command::new(&spec.command);
    command
        .args(&spec.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if !spec.inherit_env {
        command.env_clear().envs(minimal_env(std::env::vars()));
    }
    for (key, value) in &spec.env {
        command.env(key, value.expose_secret());
    }
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    die_with_parent(&mut command);
    // Its own process group, so stopping it also stops what it started (npx → node → server).
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader());
    let spawned = spawner::on_spawner_thread(move || wrapped.spawn());
    let mut child = spawned.map_err(|source| StartFailure::Spawn {
        command: spec.command.clone(),
        kind: source.kind(),
        detail: source.to_string(),
    })?;
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let (Some(stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
        unreachable!("stdin and stdout were configured as pipes")
    };
    let tail = StderrTail::default();
    let stderr = child
        .stderr()
        .take()
        .map(|pipe| tokio::spawn(log_stderr(server.clone(), pipe, tail.clone())));
    let verdict = Verdict::default();
    let stdout = StdoutGuard::new(stdout, max_line, verdict.clone());
    let process = ChildProcess {
        child,
        group,
        stderr,
        tail,
        verdict,
        exited: None,
    };
    Ok((process, Pipes { stdout, stdin }))
}

/// Variables a stdio server gets from the broker's environment unless `inherit_env` is set:
/// what finding programs, files, locale, time, temp space, proxies and trust stores need, and
/// none of the broker's own secrets. The server's `env` adds to these.
const PASSED_ON: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TEMP",
    "TMP",
    "TERM",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "npm_config_cache",
    "NPM_CONFIG_CACHE",
];

/// The part of `vars` a stdio server gets by default: [`PASSED_ON`] and the locale's `LC_*`.
pub fn minimal_env(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    vars.filter(|(key, _)| PASSED_ON.contains(&key.as_str()) || key.starts_with("LC_"))
        .collect()
}

/// Linux: the child gets SIGKILL when the broker dies, even by SIGKILL, so no server outlives
/// it. (Grandchildren are not covered by this; they see their stdin close instead.) The signal
/// comes when the forking thread exits, hence [`spawner`].
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(command: &mut tokio::process::Command) {
    let broker = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and makes only two
    // async-signal-safe system calls (prctl, getppid); it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The broker may have died between fork and prctl: then nobody would signal us.
            if nix::unistd::getppid() != broker {
                return Err(std::io::Error::other(
                    "the broker exited while starting the server",
                ));
            }
            Ok(())
        });
    }
}

/// Elsewhere there is no parent-death signal; closing stdin and the process group remain.
#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut tokio::process::Command) {}

/// Logs each stderr line at info level, tagged with the server, and keeps the last few.
async fn log_stderr(server: ServerName, pipe: ChildStderr, tail: StderrTail) {
    // A small first buffer (it grows for a long line): most servers write little or nothing
    // there, and a per-caller server has one of these per caller.
    let codec = LinesCodec::new_with_max_length(MAX_STDERR_LINE);
    let mut lines = FramedRead::with_capacity(pipe, codec, STDERR_FIRST_READ);
    while let Some(line) = lines.next().await {
        match line {
            Ok(line) => {
                tracing::info!(target: "toolbroker::stderr", server = %server, "{line}");
                tail.push(line);
            }
            Err(LinesCodecError::MaxLineLengthExceeded) => {
                tracing::info!(target: "toolbroker::stderr", server = %server,
                    "(a stderr line longer than {MAX_STDERR_LINE} bytes was dropped)");
            }
            Err(LinesCodecError::Io(_)) => break,
        }
    }
}

impl ChildProcess {
    /// The last stderr lines, for error messages; read them once the process is stopped (see
    /// [`Self::stop`]) or its last words may still be on their way.
    pub fn stderr_tail(&self) -> StderrTail {
        self.tail.clone()
    }

    /// The last stderr lines of a process that has exited, once its stderr reader has read
    /// them all (or after `STDERR_DRAIN`), so that its dying words are not missed.
    pub async fn last_words(&mut self) -> Option<String> {
        if let Some(reader) = &mut self.stderr {
            let _ = tokio::time::timeout(STDERR_DRAIN, reader).await;
            self.stderr = None;
        }
        self.tail.summary()
    }

    /// Why its stdout was cut off, if it was.
    pub fn stdout_fault(&self) -> Option<StreamFault> {
        self.verdict.fault()
    }

    /// The verdict of its stdout guard, to look at later.
    pub fn stdout_verdict(&self) -> Verdict {
        self.verdict.clone()
    }

    /// Waits until the process exits and says how it ended. Cancel-safe.
    pub async fn wait(&mut self) -> ProcessExit {
        if let Some(exit) = &self.exited {
            return exit.clone();
        }
        let exit = match self.child.wait().await {
            Ok(status) => describe_exit(status),
            Err(e) => return ProcessExit::Unwaitable(e.to_string()),
        };
        self.exited = Some(exit.clone());
        exit
    }

    /// How it ended, if it has ended within `wait` from now (to explain a failure).
    pub async fn exit_within(&mut self, wait: Duration) -> Option<ProcessExit> {
        tokio::time::timeout(wait, self.wait()).await.ok()
    }

    /// Stops the process once its stdin is closed: waits `grace` for it to exit, then sends
    /// SIGTERM to its group, waits again, then SIGKILL. Always ends by killing what is left of
    /// the group, so no grandchild outlives it. Returns how it ended.
    pub async fn stop(mut self, grace: Duration) -> ProcessExit {
        let exit = match self.exit_within(grace).await {
            Some(exit) => exit,
            None => {
                self.signal_group(Signal::SIGTERM);
                match self.exit_within(grace).await {
                    Some(exit) => exit,
                    None => {
                        self.signal_group(Signal::SIGKILL);
                        self.wait().await
                    }
                }
            }
        };
        self.signal_group(Signal::SIGKILL);
        if let Some(reader) = self.stderr.take() {
            let _ = tokio::time::timeout(STDERR_DRAIN, reader).await;
        }
        self.group = None;
        exit
    }

    fn signal_group(&self, signal: Signal) {
        if let Some(group) = self.group {
            // ESRCH means the group is already gone, which is what we want.
            let _ = killpg(group, signal);
        }
    }
}

impl Drop for ChildProcess {
    /// A backstop for paths that did not call `stop` (a panic, a dropped future): kill the group.
    fn drop(&mut self) {
        self.signal_group(Signal::SIGKILL);
        if let Some(reader) = self.stderr.take() {
            reader.abort();
        }
    }
}

/// How an exit status ended the process.
pub fn describe_exit(status: ExitStatus) -> ProcessExit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ProcessExit::Status(code),
        (None, Some(signal)) => ProcessExit::Signal(signal),
        (None, None) => ProcessExit::Other(status.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minimal_environment_keeps_what_programs_need_and_no_secrets() {
        let vars = [
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("LC_TIME", "C"),
            ("https_proxy", "http://proxy:3128"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
            ("AGENT_TOKEN", "t0k3n"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=x"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let kept: Vec<String> = minimal_env(vars.into_iter())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(kept, ["PATH", "HOME", "LC_TIME", "https_proxy"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_outlives_the_thread_that_started_it() {
        let launch = Launch {
            command: "sleep".into(),
            args: vec!["30".into()],
            env: Vec::new(),
            cwd: None,
            inherit_env: false,
        };
        let server = ServerName::parse("sleeper").unwrap();
        let runtime = tokio::runtime::Handle::current();
        // As a tokio thread may: start the server, then end (a blocking-pool thread exits
        // after 10 s idle).
        let started = std::thread::spawn(move || {
            let _entered = runtime.enter();
            spawn(&server, &launch, 1024)
        });
        let (mut process, _pipes) = started.join().unwrap().unwrap();
        let ended = tokio::time::timeout(Duration::from_millis(500), process.wait()).await;
        assert!(
            ended.is_err(),
            "the server ended with the thread that started it: {ended:?}"
        );
        process.stop(Duration::from_secs(1)).await;
    }
}
