//! A real `haproxy` (Debian's package) running the shipped `deploy/haproxy/haproxy.cfg` in
//! front of brokers: gRPC clients connect to it, and it keeps each caller on one of them.

use std::{
    net::{SocketAddr, TcpListener},
    process::Stdio,
    time::Duration,
};

use tokio::process::{Child, Command};
use tonic::transport::Channel;

use super::WAIT;

/// A running HAProxy.
pub struct Haproxy {
    _child: Child,
    /// A channel to it.
    pub channel: Channel,
}

impl Haproxy {
    /// HAProxy in front of `brokers` (at most three, as the shipped config has), once it
    /// forwards a health check to one of them.
    pub async fn start(brokers: &[SocketAddr]) -> Self {
        assert!(
            (1..=3).contains(&brokers.len()),
            "the config names 1 to 3 brokers"
        );
        let config = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/haproxy/haproxy.cfg");
        for _ in 0..10 {
            // HAProxy binds by itself: a port free a moment ago, tried again if taken since.
            let addr = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap();
            let mut command = Command::new("haproxy");
            command
                .args(["-db", "-f", config])
                .env("FRONT_BIND", addr.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true);
            for (i, broker) in brokers.iter().enumerate() {
                command.env(format!("BROKER{}", i + 1), broker.to_string());
            }
            let mut child = command
                .spawn()
                .expect("haproxy runs (Debian package haproxy; see the README)");
            let channel = Channel::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect_lazy();
            let deadline = tokio::time::Instant::now() + WAIT;
            let mut exited = false;
            while tokio::time::Instant::now() < deadline {
                if child.try_wait().ok().flatten().is_some() {
                    exited = true;
                    break;
                }
                let mut health =
                    tonic_health::pb::health_client::HealthClient::new(channel.clone());
                let asked = health
                    .check(tonic_health::pb::HealthCheckRequest::default())
                    .await;
                if asked.is_ok() {
                    return Self {
                        _child: child,
                        channel,
                    };
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(
                exited,
                "haproxy on {addr} did not forward a health check within {WAIT:?}"
            );
        }
        panic!("haproxy did not start on a free port ten times")
    }
}
