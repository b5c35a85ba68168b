//! `max_connection_age`: the broker closes old client connections gracefully (HTTP/2 GOAWAY),
//! so clients reconnect — through an L4 Service perhaps to another replica — without failed calls.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Broker, demo_server};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint, Uri};
use toolbroker::proto::{self, tool_broker_client::ToolBrokerClient};

/// A channel to the broker that counts the TCP connections it opens.
async fn counting_channel(broker: &Broker) -> (Channel, Arc<AtomicUsize>) {
    let connections = Arc::new(AtomicUsize::new(0));
    let (addr, count) = (broker.addr, connections.clone());
    let connector = tower::service_fn(move |_: Uri| {
        count.fetch_add(1, Ordering::SeqCst);
        async move { TcpStream::connect(addr).await.map(TokioIo::new) }
    });
    let channel = Endpoint::from_static("http://broker")
        .connect_with_connector(connector)
        .await
        .expect("connect");
    (channel, connections)
}

/// Calls ListTools every 100 ms for `period`. A tonic client does not retry a call that raced
/// the connection's GOAWAY ("transport error": the broker never saw it) the way grpc-go, grpcio
/// and grpc-js do, so such a call is retried once here; any other failure fails the test.
/// Returns how many calls needed that retry.
async fn keep_calling(client: &mut ToolBrokerClient<Channel>, period: Duration) -> usize {
    let end = Instant::now() + period;
    let (mut calls, mut retried) = (0, 0);
    while Instant::now() < end {
        let mut attempt = client.list_tools(proto::ListToolsRequest::default()).await;
        if matches!(&attempt, Err(status) if status.message() == "transport error") {
            retried += 1;
            attempt = client.list_tools(proto::ListToolsRequest::default()).await;
        }
        let listed = attempt.unwrap_or_else(|status| panic!("call {calls} failed: {status:?}"));
        assert!(!listed.into_inner().tools.is_empty());
        calls += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    retried
}

fn aged_config() -> String {
    format!(
        "max_connection_age: 1s\nmax_connection_age_grace: 1s\nservers:\n{}",
        demo_server("demo", "")
    )
}

#[tokio::test]
async fn old_connections_are_closed_and_clients_reconnect_without_failed_calls() {
    let broker = Broker::start(&aged_config()).await;
    broker.wait_ready().await;
    let (channel, connections) = counting_channel(&broker).await;
    let retried = keep_calling(
        &mut ToolBrokerClient::new(channel),
        Duration::from_millis(3500),
    )
    .await;
    let opened = connections.load(Ordering::SeqCst);
    assert!(
        opened >= 2,
        "3.5 s of calls with max_connection_age 1s used {opened} connection(s)"
    );
    eprintln!("{opened} connections; {retried} call(s) raced a GOAWAY and were retried");
}

#[tokio::test]
async fn a_watch_stream_runs_on_for_the_grace_then_ends() {
    let broker = Broker::start(&aged_config()).await;
    broker.wait_ready().await;
    // Its own connection: tonic sends new calls on a connection that got GOAWAY while a stream
    // keeps it open, and they fail (see README, Deploy); other gRPC clients open a new one.
    let (channel, _) = counting_channel(&broker).await;
    let started = Instant::now();
    let mut watch = ToolBrokerClient::new(channel)
        .watch(proto::WatchRequest::default())
        .await
        .expect("Watch")
        .into_inner();
    let snapshot = watch.message().await.expect("snapshot").expect("open");
    assert!(snapshot.event.is_some());
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(_)) = watch.message().await {}
    })
    .await;
    let after = started.elapsed();
    assert!(ended.is_ok(), "the Watch stream still runs after 10 s");
    assert!(
        after >= Duration::from_millis(1900) && after <= Duration::from_secs(6),
        "Watch ended after {after:?}; expected about 2 s (age 1 s + grace 1 s)"
    );
}

#[tokio::test]
async fn without_max_connection_age_one_connection_serves_every_call() {
    let broker = Broker::start(&format!("servers:\n{}", demo_server("demo", ""))).await;
    broker.wait_ready().await;
    let (channel, connections) = counting_channel(&broker).await;
    let mut client = ToolBrokerClient::new(channel);
    let mut watch = client
        .watch(proto::WatchRequest::default())
        .await
        .expect("Watch")
        .into_inner();
    watch.message().await.expect("snapshot").expect("open");

    let retried = keep_calling(&mut client, Duration::from_millis(2500)).await;
    assert_eq!((connections.load(Ordering::SeqCst), retried), (1, 0));
    let still_open = tokio::time::timeout(Duration::from_millis(200), watch.message()).await;
    assert!(
        still_open.is_err(),
        "the Watch stream stays open: {still_open:?}"
    );
}
