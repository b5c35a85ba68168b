//! The resource and prompt RPCs: listed from the catalog (as the caller's token allows), read
//! and got from the servers.

use tonic::Request;

use super::{call_context::CallContext, offer_messages};
use crate::{auth, core::broker::Broker, domain::request_error::RequestError, proto};

/// ListResources: the resources and templates of the servers asked for (all when none) whose
/// resources the caller may read.
pub fn list_resources(
    broker: &Broker,
    request: Request<proto::ListResourcesRequest>,
) -> Result<proto::ListResourcesResponse, RequestError> {
    let caller = auth::caller(request.extensions());
    let servers = request.into_inner().servers;
    let snapshot = broker.snapshot();
    check_servers(&servers, |name| snapshot.catalog.server(name).is_some())?;
    let mut response = proto::ListResourcesResponse::default();
    for (server, offered) in snapshot.catalog.resources() {
        let name = server.as_str();
        if !(servers.is_empty() || servers.iter().any(|s| s == name)) || !caller.may_read(name) {
            continue;
        }
        let resources = offered.resources.iter();
        response
            .resources
            .extend(resources.map(|spec| offer_messages::resource(server, spec)));
        let templates = offered.templates.iter();
        response
            .templates
            .extend(templates.map(|spec| offer_messages::template(server, spec)));
    }
    Ok(response)
}

/// ReadResource: one resource of one server, if the caller may read that server's.
pub async fn read_resource(
    broker: &Broker,
    request: Request<proto::ReadResourceRequest>,
) -> Result<proto::ReadResourceResponse, RequestError> {
    let (metadata, extensions, request) = request.into_parts();
    let caller = auth::caller(&extensions);
    if request.uri.is_empty() {
        return Err(RequestError::InvalidArguments(
            "uri is empty: give a resource's URI (ListResources shows them)".into(),
        ));
    }
    if !caller.may_read(&request.server) {
        return Err(RequestError::ResourcesDenied {
            caller: caller.key.id,
            server: request.server,
        });
    }
    tracing::Span::current().record("server", request.server.as_str());
    let context = CallContext { caller, metadata };
    let (server, result) = broker
        .read_resource(&request.server, &request.uri, &context)
        .await?;
    offer_messages::read_response(&server, result)
}

/// ListPrompts: the prompts of the servers asked for (all when none) the caller may see.
pub fn list_prompts(
    broker: &Broker,
    request: Request<proto::ListPromptsRequest>,
) -> Result<proto::ListPromptsResponse, RequestError> {
    let caller = auth::caller(request.extensions());
    let servers = request.into_inner().servers;
    let snapshot = broker.snapshot();
    check_servers(&servers, |name| snapshot.catalog.server(name).is_some())?;
    let prompts = snapshot
        .catalog
        .prompts()
        .values()
        .filter(|prompt| {
            let server = prompt.server.as_str();
            (servers.is_empty() || servers.iter().any(|s| s == server))
                && caller.may_prompt(&prompt.name)
        })
        .map(|prompt| offer_messages::prompt(prompt))
        .collect();
    Ok(proto::ListPromptsResponse { prompts })
}

/// GetPrompt: one prompt filled in, if the caller may see it.
pub async fn get_prompt(
    broker: &Broker,
    request: Request<proto::GetPromptRequest>,
) -> Result<proto::GetPromptResponse, RequestError> {
    let (metadata, extensions, request) = request.into_parts();
    let caller = auth::caller(&extensions);
    if !caller.may_prompt(&request.name) {
        return Err(RequestError::PromptDenied {
            caller: caller.key.id,
            prompt: request.name,
        });
    }
    let arguments = request
        .arguments
        .into_iter()
        .map(|(name, value)| (name, serde_json::Value::String(value)))
        .collect();
    let context = CallContext { caller, metadata };
    let (server, result) = broker
        .get_prompt(&request.name, arguments, &context)
        .await?;
    tracing::Span::current().record("server", server.as_str());
    offer_messages::prompt_response(&server, result)
}

/// Every named server must exist.
fn check_servers(servers: &[String], exists: impl Fn(&str) -> bool) -> Result<(), RequestError> {
    match servers.iter().find(|name| !exists(name)) {
        Some(unknown) => Err(RequestError::UnknownServer {
            name: unknown.clone(),
        }),
        None => Ok(()),
    }
}
