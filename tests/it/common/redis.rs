//! A real `redis-server` (Debian's package) for the shared-state tests: on a free port of
//! 127.0.0.1, nothing saved to disk, killed with the test; it can be stopped and started again
//! on the same port, as a Redis that goes away and comes back.

use std::{net::TcpListener, process::Stdio, time::Duration};

use tokio::process::{Child, Command};

use super::WAIT;

/// A running (or stopped) Redis.
pub struct RedisServer {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// A fresh Redis, answering PING.
    pub async fn start() -> Self {
        let mut dir = tempfile::tempdir().unwrap();
        for _ in 0..10 {
            // Redis cannot take a listener the test holds: a port free a moment ago, tried
            // again if another process took it in between.
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut redis = Self {
                child: None,
                port,
                dir,
            };
            if redis.run().await {
                return redis;
            }
            dir = redis.dir;
        }
        panic!("redis-server did not start on a free port ten times; is it installed (README)?")
    }

    /// Starts it again after [`Self::stop`], on the same port (empty: nothing was saved).
    pub async fn restart(&mut self) {
        assert!(
            self.run().await,
            "redis-server did not start again on port {}",
            self.port
        );
    }

    /// Kills it (SIGKILL, as a crash).
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Starts redis-server; whether it answers PING within [`WAIT`].
    async fn run(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server runs (Debian package redis-server; see the README)");
        self.child = Some(child);
        let deadline = tokio::time::Instant::now() + WAIT;
        while tokio::time::Instant::now() < deadline {
            if let Some(child) = &mut self.child
                && child.try_wait().ok().flatten().is_some()
            {
                self.child = None;
                return false;
            }
            if let Ok(client) = redis::Client::open(self.url())
                && let Ok(mut connection) = client.get_multiplexed_async_connection().await
                && redis::cmd("PING")
                    .query_async::<String>(&mut connection)
                    .await
                    .is_ok()
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }
}
