//! A broker process for a measurement: started from the release binary next to this example,
//! on a free port, with the demo server (or a given config), and measured from /proc.

use std::{future::Future, process::Stdio, time::Duration};

use anyhow::{Context as _, anyhow};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};
use tonic::transport::Channel;
use toolbroker::proto::{CallToolRequest, tool_broker_client::ToolBrokerClient};

use crate::{Plan, calls, report::Figures};

/// A running broker.
pub struct BrokerProcess {
    child: Child,
    /// Its gRPC address.
    pub addr: String,
    _dir: tempfile::TempDir,
    /// Its Unix socket, and the directory that holds it.
    socket: Option<(std::path::PathBuf, tempfile::TempDir)>,
}

/// The toolbroker binary built alongside this example, or the one `LOADGEN_BROKER_BIN` names
/// (to compare two builds of the broker with one load generator).
pub fn toolbroker_bin() -> anyhow::Result<std::path::PathBuf> {
    if let Some(bin) = std::env::var_os("LOADGEN_BROKER_BIN") {
        return Ok(bin.into());
    }
    let exe = std::env::current_exe()?;
    exe.parent()
        .and_then(|examples| examples.parent())
        .map(|dir| dir.join("toolbroker"))
        .filter(|p| p.exists())
        .ok_or_else(|| anyhow!("build the binary first: cargo build --release"))
}

impl BrokerProcess {
    /// Starts a broker serving `config` (YAML), with extra environment variables.
    pub async fn start(config: &str, env: &[(&str, String)]) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("broker.yaml");
        std::fs::write(&path, config)?;
        let mut child = Command::new(toolbroker_bin()?)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
                "--config",
            ])
            .arg(&path)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .envs(std::env::var("LOADGEN_BROKER_WORKERS").map(|n| ("TOKIO_WORKER_THREADS", n)))
            .env(
                "RUST_LOG",
                "warn,toolbroker::app=info,toolbroker::health=info",
            )
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
        let addr = loop {
            let line = lines
                .next_line()
                .await?
                .ok_or_else(|| anyhow!("the broker exited"))?;
            let json: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if json["message"] == "listening" {
                break json["addr"].as_str().unwrap_or_default().to_owned();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            child,
            addr,
            _dir: dir,
            socket: None,
        })
    }

    /// Starts a broker serving `config` on its port and on a Unix socket of its own as well
    /// (see [`Self::socket_channel`]).
    pub async fn start_with_socket(config: &str) -> anyhow::Result<Self> {
        let socket = tempfile::tempdir()?;
        let path = socket.path().join("grpc.sock");
        let config = format!("unix_listen: {:?}\n{config}", path.display().to_string());
        let mut broker = Self::start(&config, &[]).await?;
        broker.socket = Some((path, socket));
        Ok(broker)
    }

    /// A connection to the broker.
    pub async fn channel(&self) -> anyhow::Result<Channel> {
        Ok(Channel::from_shared(format!("http://{}", self.addr))?
            .connect()
            .await?)
    }

    /// A connection over the broker's Unix socket (one started by [`Self::start_with_socket`]).
    pub async fn socket_channel(&self) -> anyhow::Result<Channel> {
        let (path, _) = self.socket.as_ref().ok_or_else(|| anyhow!("no socket"))?;
        let path = path.clone();
        let connect = tower::service_fn(move |_: http::Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        });
        let endpoint = tonic::transport::Endpoint::try_from("http://localhost")?;
        Ok(endpoint.connect_with_connector(connect).await?)
    }

    /// A connected client, once the broker reports itself ready.
    pub async fn client(&self) -> anyhow::Result<ToolBrokerClient<Channel>> {
        ready_client(self.channel().await?).await
    }
}

/// A client on `channel`, once the broker reports itself ready.
async fn ready_client(channel: Channel) -> anyhow::Result<ToolBrokerClient<Channel>> {
    {
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        let request = tonic_health::pb::HealthCheckRequest {
            service: "toolbroker.v1.ToolBroker".into(),
        };
        let mut statuses = health.watch(request).await?.into_inner();
        while let Some(status) = statuses.message().await? {
            if status.status
                == tonic_health::pb::health_check_response::ServingStatus::Serving as i32
            {
                return Ok(ToolBrokerClient::new(channel));
            }
        }
        Err(anyhow!("the broker never became ready"))
    }
}

impl BrokerProcess {
    /// Closed-loop CallTool `request` at `concurrency`, with the broker's CPU per call and RSS.
    pub async fn call_load(
        &self,
        request: CallToolRequest,
        concurrency: usize,
        plan: Plan,
    ) -> anyhow::Result<Figures> {
        self.checked_load(request, None, concurrency, plan).await
    }

    /// Closed-loop CallTool `request`, every reply checked: no tool error, and the text
    /// `expected` when one is given.
    async fn checked_load(
        &self,
        request: CallToolRequest,
        expected: Option<&'static str>,
        concurrency: usize,
        plan: Plan,
    ) -> anyhow::Result<Figures> {
        let client = self.client().await?;
        self.checked_load_on(client, request, expected, concurrency, plan)
            .await
    }

    /// [`Self::checked_load`] on `client`.
    async fn checked_load_on(
        &self,
        client: ToolBrokerClient<Channel>,
        request: CallToolRequest,
        expected: Option<&'static str>,
        concurrency: usize,
        plan: Plan,
    ) -> anyhow::Result<Figures> {
        let call = move || {
            let mut client = client.clone();
            let request = request.clone();
            async move {
                let reply = client.call_tool(request).await?.into_inner();
                anyhow::ensure!(!reply.is_error, "the call failed: {reply:?}");
                if let Some(text) = expected {
                    anyhow::ensure!(reply.text == text, "wrong answer: {reply:?}");
                }
                anyhow::Ok(())
            }
        };
        measure_process(self.pid(), concurrency, plan, call).await
    }

    /// [`Self::call_load`] of `echo {"message": "hello"}`, every answer checked to be "hello".
    pub async fn echo_load(&self, concurrency: usize, plan: Plan) -> anyhow::Result<Figures> {
        self.checked_load(echo_hello(), Some("hello"), concurrency, plan)
            .await
    }

    /// [`Self::echo_load`] over the broker's Unix socket.
    pub async fn socket_echo_load(
        &self,
        concurrency: usize,
        plan: Plan,
    ) -> anyhow::Result<Figures> {
        let client = ready_client(self.socket_channel().await?).await?;
        self.checked_load_on(client, echo_hello(), Some("hello"), concurrency, plan)
            .await
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Its resident memory, in MiB.
    pub fn rss_mib(&self) -> anyhow::Result<f64> {
        rss_mib_of(self.pid())
    }
}

/// Closed-loop `call` at `concurrency` (see [`calls::run`]), with the CPU and RSS of the
/// process `pid` that serves the calls, and the CPU of the whole machine.
pub async fn measure_process<F, Fut>(
    pid: u32,
    concurrency: usize,
    plan: Plan,
    call: F,
) -> anyhow::Result<Figures>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    // CPU over the measured window only, as the calls are counted: read when the warm-up
    // ends and again when the workers have stopped.
    let warmup = plan.warmup;
    let at_warm = tokio::spawn(async move {
        tokio::time::sleep(warmup).await;
        anyhow::Ok((cpu_of(pid)?, machine_cpu()?))
    });
    let mut figures = calls::run(concurrency, plan.warmup, plan.duration, call).await?;
    let (process_then, machine_then) = at_warm.await??;
    let machine_now = machine_cpu()?;
    figures.broker_cpu = Some(cpu_of(pid)? - process_then);
    figures.machine_cpu = Some(machine_now.busy - machine_then.busy);
    figures.machine_steal = Some(machine_now.steal - machine_then.steal);
    figures.broker_rss_mib = Some(rss_mib_of(pid)?);
    Ok(figures)
}

/// The resident memory of a process, in MiB.
pub fn rss_mib_of(pid: u32) -> anyhow::Result<f64> {
    status_mib(pid, "VmRSS")
}

/// A memory field of /proc/PID/status (`VmRSS`, `RssAnon`, ...), in MiB.
pub fn status_mib(pid: u32, field: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    Ok(kib / 1024.0)
}

/// CPU time (user + system) of a process, from /proc/PID/stat.
pub fn cpu_of(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may contain spaces) start at field 3.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    Ok(from_ticks(ticks))
}

/// A time /proc reports in USER_HZ, which Linux fixes at 100 for user space.
fn from_ticks(ticks: u64) -> Duration {
    Duration::from_millis(ticks * 10)
}

/// The machine's CPU time, summed over its CPUs.
pub struct MachineCpu {
    /// Busy: user, nice, system, interrupts.
    pub busy: Duration,
    /// Stolen: wanted, but given by the hypervisor to other guests.
    pub steal: Duration,
}

/// The machine's CPU time so far, from /proc/stat.
pub fn machine_cpu() -> anyhow::Result<MachineCpu> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let total = stat.lines().next().context("an empty /proc/stat")?;
    let ticks: Vec<u64> = total
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal
    Ok(MachineCpu {
        busy: from_ticks(at(0) + at(1) + at(2) + at(5) + at(6)),
        steal: from_ticks(at(7)),
    })
}

/// CallTool `echo {"message": "hello"}`.
pub fn echo_hello() -> CallToolRequest {
    CallToolRequest {
        name: "echo".into(),
        arguments_json: r#"{"message": "hello"}"#.into(),
        ..Default::default()
    }
}
