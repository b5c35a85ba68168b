//! A broker serving on a Unix socket, and a tonic channel over that socket.

use std::path::Path;

use serde_json::json;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};

use super::{Broker, demo};

/// A broker with the demo server, one token (`token`, caller `agent`), and its socket at
/// `socket`.
pub async fn broker_on_socket(socket: &Path, token: &str) -> Broker {
    let tokens = json!([{"name": "agent", "value_env": "AGENT_TOKEN"}]);
    Broker::builder()
        .top("auth", json!({ "tokens": tokens }))
        .top("unix_listen", socket.display().to_string())
        .server(demo("demo"))
        .env("AGENT_TOKEN", token)
        .start()
        .await
}

/// A tonic channel over the socket.
pub async fn socket_channel(socket: &Path) -> Channel {
    let socket = socket.to_owned();
    Endpoint::try_from("http://localhost")
        .expect("a valid endpoint")
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let socket = socket.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    UnixStream::connect(socket).await?,
                ))
            }
        }))
        .await
        .expect("connect to the socket")
}
