//! ListTools read by a bare HTTP/2 client (the `h2` crate, no tonic): the answer's frames are
//! counted and their flow-control window given back, never copied or decoded. What remains
//! of the p50 is the broker, the network and h2's framing on both sides.

use anyhow::Context as _;
use bytes::Bytes;
use tokio::net::TcpStream;

use crate::{
    Plan,
    broker::{BrokerProcess, measure_process},
    report::Figures,
};

/// The gRPC message of an empty `ListToolsRequest`: not compressed, length 0.
const EMPTY_REQUEST: &[u8] = &[0, 0, 0, 0, 0];

/// Closed-loop ListTools at concurrency 1 over one bare h2 connection, with the broker's CPU
/// per answer. Each answer must be `message_len` bytes of message with `grpc-status: 0`.
pub async fn list_tools(
    broker: &BrokerProcess,
    message_len: usize,
    plan: Plan,
) -> anyhow::Result<Figures> {
    let client = connect(&broker.addr).await?;
    let uri = format!("http://{}/toolbroker.v1.ToolBroker/ListTools", broker.addr);
    let call = move || {
        let client = client.clone();
        let uri = uri.clone();
        async move {
            let mut client = client.ready().await?;
            let request = http::Request::post(uri)
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())?;
            let (answer, mut send) = client.send_request(request, false)?;
            send.send_data(Bytes::from_static(EMPTY_REQUEST), true)?;
            let answer = answer.await?;
            anyhow::ensure!(answer.status() == 200, "HTTP status {}", answer.status());
            let mut body = answer.into_body();
            let mut received = 0;
            while let Some(data) = body.data().await {
                let data = data?;
                received += data.len();
                body.flow_control().release_capacity(data.len())?;
            }
            let trailers = body.trailers().await?.unwrap_or_default();
            let status = trailers.get("grpc-status").map(|s| s.as_bytes());
            anyhow::ensure!(
                status == Some(b"0") && received == 5 + message_len,
                "ListTools answered {received} bytes (expected {}), trailers {trailers:?}",
                5 + message_len
            );
            anyhow::Ok(())
        }
    };
    measure_process(broker.pid(), 1, plan, call).await
}

/// An h2 connection with h2's default settings (16 KiB frames, as most gRPC clients), but
/// windows large enough that the answer never waits for a window update.
async fn connect(addr: &str) -> anyhow::Result<h2::client::SendRequest<Bytes>> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(32 << 20)
        .initial_connection_window_size(64 << 20)
        .handshake(tcp)
        .await
        .context("the h2 handshake with the broker")?;
    tokio::spawn(connection);
    Ok(client)
}
