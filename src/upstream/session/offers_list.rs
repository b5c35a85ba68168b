//! Listing what a server offers besides tools: every page of `resources/list`,
//! `resources/templates/list` and `prompts/list`, turned into the catalog's specs. Only what
//! the server's capabilities announce is asked for.

use rmcp::{
    RoleClient,
    model::{
        ClientRequest, ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest,
        Prompt, Resource, ResourceTemplate, ServerResult,
    },
    service::Peer,
};

use crate::domain::{
    offer::{PromptArgumentSpec, PromptSpec, ResourceSpec, Resources, TemplateSpec},
    outcome::ListingFailure,
};
use crate::upstream::session::{icons::icons, pages::all_pages};

/// What the server announced at initialize.
#[derive(Debug, Clone, Copy, Default)]
pub struct Offers {
    /// It has resources.
    pub resources: bool,
    /// It has prompts.
    pub prompts: bool,
}

impl Offers {
    /// What `peer`'s server announced.
    pub fn of(peer: &Peer<RoleClient>) -> Self {
        let Some(info) = peer.peer_info() else {
            return Self::default();
        };
        Self {
            resources: info.capabilities.resources.is_some(),
            prompts: info.capabilities.prompts.is_some(),
        }
    }
}

/// Sends a paginated list request and takes the page out of its answer.
async fn page<T>(
    peer: &Peer<RoleClient>,
    request: ClientRequest,
    take: impl FnOnce(ServerResult) -> Option<(Vec<T>, Option<String>)>,
) -> Result<(Vec<T>, Option<String>), ListingFailure> {
    match peer.send_request(request).await {
        Ok(result) => take(result).ok_or(ListingFailure::NotAList),
        Err(e) => Err(ListingFailure::Failed(e.to_string())),
    }
}

/// Every resource and template (none if the server has no `resources` capability).
pub async fn list_resources(
    peer: &Peer<RoleClient>,
    offers: Offers,
) -> Result<Resources, ListingFailure> {
    if !offers.resources {
        return Ok(Resources::default());
    }
    let resources = all_pages(|params| {
        let request = ClientRequest::ListResourcesRequest(ListResourcesRequest::with_param(params));
        page(peer, request, |result| match result {
            ServerResult::ListResourcesResult(page) => Some((
                page.resources.into_iter().map(resource_spec).collect(),
                page.next_cursor,
            )),
            _ => None,
        })
    })
    .await?;
    let templates = all_pages(|params| {
        let request = ClientRequest::ListResourceTemplatesRequest(
            ListResourceTemplatesRequest::with_param(params),
        );
        page(peer, request, |result| match result {
            ServerResult::ListResourceTemplatesResult(page) => Some((
                page.resource_templates
                    .into_iter()
                    .map(template_spec)
                    .collect(),
                page.next_cursor,
            )),
            // A server with resources but no templates may answer with an empty result.
            ServerResult::EmptyResult(_) => Some((Vec::new(), None)),
            _ => None,
        })
    })
    .await
    // Templates are optional: a server that does not know the method has none.
    .unwrap_or_default();
    Ok(Resources {
        resources,
        templates,
    })
}

/// Every prompt (none if the server has no `prompts` capability).
pub async fn list_prompts(
    peer: &Peer<RoleClient>,
    offers: Offers,
) -> Result<Vec<PromptSpec>, ListingFailure> {
    if !offers.prompts {
        return Ok(Vec::new());
    }
    all_pages(|params| {
        let request = ClientRequest::ListPromptsRequest(ListPromptsRequest::with_param(params));
        page(peer, request, |result| match result {
            ServerResult::ListPromptsResult(page) => Some((
                page.prompts.into_iter().map(prompt_spec).collect(),
                page.next_cursor,
            )),
            _ => None,
        })
    })
    .await
}

fn resource_spec(resource: Resource) -> ResourceSpec {
    ResourceSpec {
        uri: resource.uri,
        name: resource.name,
        title: resource.title,
        description: resource.description,
        mime_type: resource.mime_type,
        size: resource.size,
        icons: icons(resource.icons),
    }
}

fn template_spec(template: ResourceTemplate) -> TemplateSpec {
    TemplateSpec {
        uri_template: template.uri_template,
        name: template.name,
        title: template.title,
        description: template.description,
        mime_type: template.mime_type,
        icons: icons(template.icons),
    }
}

fn prompt_spec(prompt: Prompt) -> PromptSpec {
    PromptSpec {
        original: prompt.name,
        title: prompt.title,
        description: prompt.description,
        arguments: prompt
            .arguments
            .unwrap_or_default()
            .into_iter()
            .map(|argument| PromptArgumentSpec {
                name: argument.name,
                description: argument.description,
                required: argument.required.unwrap_or(false),
            })
            .collect(),
        icons: icons(prompt.icons),
    }
}
