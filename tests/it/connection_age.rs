//! `max_connection_age`: the broker closes old client connections gracefully (HTTP/2 GOAWAY),
//! so clients reconnect — through an L4 Service perhaps to another replica — without failed calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{Broker, WAIT, Watch, demo};
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

/// Whether a call failed in the client before the broker saw it: it raced the connection's
/// GOAWAY or close, and tonic says "transport error", or hyper cancelled the request still queued
/// on the closing connection ("operation was canceled": "connection closed").
fn never_sent(status: &tonic::Status) -> bool {
    if status.message() == "transport error" {
        return true;
    }
    let mut cause = std::error::Error::source(status);
    while let Some(error) = cause {
        if error
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_canceled)
        {
            return true;
        }
        cause = error.source();
    }
    false
}

/// Calls ListTools every 100 ms until `done` says so. A tonic client does not retry a call that
/// raced the connection's GOAWAY (see [`never_sent`]) the way grpc-go, grpcio and grpc-js do, so
/// such a call is retried once here; any other failure fails the test.
/// Returns how many calls needed that retry.
async fn keep_calling(client: &mut ToolBrokerClient<Channel>, done: impl Fn() -> bool) -> usize {
    let (mut calls, mut retried) = (0, 0);
    while !done() {
        let mut attempt = client.list_tools(proto::ListToolsRequest::default()).await;
        if matches!(&attempt, Err(status) if never_sent(status)) {
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

/// A broker with one demo server whose client connections live 1 s, then 1 s of grace.
async fn aged_broker() -> Broker {
    let broker = Broker::builder()
        .top("max_connection_age", "1s")
        .top("max_connection_age_grace", "1s")
        .server(demo("demo"))
        .start()
        .await;
    broker.wait_ready().await;
    broker
}

#[tokio::test]
async fn old_connections_are_closed_and_clients_reconnect_without_failed_calls() {
    let broker = aged_broker().await;
    let (channel, connections) = counting_channel(&broker).await;
    // Calls on until the client has had to reconnect twice: calls ran across two GOAWAYs.
    let reconnected_twice = || connections.load(Ordering::SeqCst) >= 3;
    let mut client = ToolBrokerClient::new(channel);
    let calling = keep_calling(&mut client, reconnected_twice);
    let retried = tokio::time::timeout(WAIT, calling)
        .await
        .unwrap_or_else(|_| panic!("no second reconnection within {WAIT:?} with age 1 s"));
    let opened = connections.load(Ordering::SeqCst);
    eprintln!("{opened} connections; {retried} call(s) raced a GOAWAY and were retried");
}

#[tokio::test]
async fn a_watch_stream_runs_on_for_the_grace_then_ends() {
    let broker = aged_broker().await;
    // Before the connection opens: the age counts from then at the earliest.
    let started = Instant::now();
    // Its own connection: tonic sends new calls on a connection that got GOAWAY while a stream
    // keeps it open, and they fail (see README, Deploy); other gRPC clients open a new one.
    let (channel, _) = counting_channel(&broker).await;
    let mut watch = Watch::open(ToolBrokerClient::new(channel), &[])
        .await
        .expect("Watch");
    watch.snapshot().await;
    watch.end().await;
    let after = started.elapsed();
    assert!(
        after >= Duration::from_millis(1900),
        "Watch ended after {after:?}; not before 2 s (age 1 s + grace 1 s)"
    );
}

#[tokio::test]
async fn without_max_connection_age_one_connection_serves_every_call() {
    let broker = Broker::builder().server(demo("demo")).start().await;
    broker.wait_ready().await;
    let (channel, connections) = counting_channel(&broker).await;
    let mut client = ToolBrokerClient::new(channel);
    let mut watch = Watch::open(client.clone(), &[]).await.expect("Watch");
    watch.snapshot().await;

    // Longer than an age of 1 s and its grace would last: nothing is closed.
    let end = Instant::now() + Duration::from_millis(2500);
    let retried = keep_calling(&mut client, || Instant::now() >= end).await;
    assert_eq!((connections.load(Ordering::SeqCst), retried), (1, 0));
    watch.stays_quiet_for(Duration::from_millis(200)).await;
}
