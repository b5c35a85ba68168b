//! A minimal OTLP/gRPC trace collector that accepts and drops spans, so export runs for real.

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_server::{TraceService, TraceServiceServer},
};

struct Sink;

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        _request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// Starts the collector on a free port and returns its endpoint URL.
pub async fn start() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(Sink))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    Ok(format!("http://{addr}"))
}
