//! grpc.health.v1 and server reflection on the broker's port.

use crate::common::{self, Broker, Server, command, demo};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

async fn health(broker: &Broker, service: &str) -> ServingStatus {
    let request = HealthCheckRequest {
        service: service.into(),
    };
    let response = HealthClient::new(broker.channel.clone())
        .check(request)
        .await
        .unwrap_or_else(|e| panic!("health of {service:?}: {e}"))
        .into_inner();
    response.status()
}

/// A server that cannot start.
fn ghost() -> Server {
    command("ghost", "/nonexistent/server", &[])
}

#[tokio::test]
async fn health_reports_the_process_the_broker_and_each_server() {
    let broker = Broker::builder()
        .servers([demo("demo"), ghost()])
        .start()
        .await;
    broker.wait_ready().await;
    assert_eq!(health(&broker, "").await, ServingStatus::Serving);
    assert_eq!(
        health(&broker, "toolbroker.v1.ToolBroker").await,
        ServingStatus::Serving
    );
    assert_eq!(
        health(&broker, "toolbroker.server.demo").await,
        ServingStatus::Serving
    );
    assert_eq!(
        health(&broker, "toolbroker.server.ghost").await,
        ServingStatus::NotServing
    );
}

#[tokio::test]
async fn readiness_all_waits_for_every_server() {
    let broker = Broker::builder()
        .top("readiness", "all")
        .servers([demo("demo"), ghost()])
        .start()
        .await;
    common::wait_health(broker.channel.clone(), "toolbroker.server.demo").await;
    broker
        .wait_for_state("ghost", toolbroker::proto::ServerState::Failed)
        .await;
    assert_eq!(
        health(&broker, "toolbroker.v1.ToolBroker").await,
        ServingStatus::NotServing
    );
}

#[tokio::test]
async fn reflection_v1_and_v1alpha_list_every_service() {
    use tokio_stream::StreamExt as _;
    let broker = Broker::builder().server(demo("demo")).start().await;

    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut client = ServerReflectionClient::new(broker.channel.clone());
    let mut responses = client
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection v1")
        .into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("not a service list")
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    for want in ["toolbroker.v1.ToolBroker", "grpc.health.v1.Health"] {
        assert!(names.contains(&want), "{want} not in {names:?}");
    }

    use tonic_reflection::pb::v1alpha::{
        ServerReflectionRequest as AlphaRequest,
        server_reflection_client::ServerReflectionClient as AlphaClient,
        server_reflection_request::MessageRequest as AlphaMessage,
        server_reflection_response::MessageResponse as AlphaResponse,
    };
    let request = AlphaRequest {
        host: String::new(),
        message_request: Some(AlphaMessage::FileContainingSymbol(
            "toolbroker.v1.ToolBroker".into(),
        )),
    };
    let mut alpha = AlphaClient::new(broker.channel.clone());
    let mut responses = alpha
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection v1alpha")
        .into_inner();
    let Some(AlphaResponse::FileDescriptorResponse(files)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("no descriptor")
    };
    assert!(!files.file_descriptor_proto.is_empty());
}
