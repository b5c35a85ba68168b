//! `toolbroker tools` and `toolbroker call`: a terminal's view of a running broker.

use anyhow::Context as _;

use crate::{
    cli::{CallArgs, ClientArgs},
    proto::{self, content::Kind, tool_broker_client::ToolBrokerClient},
};

async fn connect(args: &ClientArgs) -> anyhow::Result<ToolBrokerClient<tonic::transport::Channel>> {
    ToolBrokerClient::connect(args.addr.clone())
        .await
        .with_context(|| format!("cannot connect to {}", args.addr))
}

/// Prints every tool: name, server and description.
pub async fn list_tools(args: &ClientArgs) -> anyhow::Result<()> {
    let response = connect(args)
        .await?
        .list_tools(proto::ListToolsRequest::default())
        .await
        .map_err(status_error)?
        .into_inner();
    for tool in response.tools {
        let params: Vec<String> = tool
            .params
            .iter()
            .map(|p| {
                format!(
                    "{}{}: {}",
                    p.name,
                    if p.required { "" } else { "?" },
                    p.r#type
                )
            })
            .collect();
        println!("{}({})  [{}]", tool.name, params.join(", "), tool.server);
        if !tool.description.is_empty() {
            println!("    {}", tool.description);
        }
    }
    Ok(())
}

/// Calls a tool and prints its result; a tool error exits non-zero.
pub async fn call(args: &CallArgs) -> anyhow::Result<()> {
    let request = proto::CallToolRequest {
        name: args.name.clone(),
        arguments_json: args.arguments.clone(),
        ..Default::default()
    };
    let response = connect(&args.client)
        .await?
        .call_tool(request)
        .await?
        .into_inner();
    for content in &response.content {
        match &content.kind {
            Some(Kind::Text(text)) => println!("{}", text.text),
            Some(Kind::Image(image)) => {
                println!("[image {} bytes {}]", image.mime_type, image.data.len())
            }
            Some(Kind::Audio(audio)) => {
                println!("[audio {} bytes {}]", audio.mime_type, audio.data.len())
            }
            Some(Kind::Resource(resource)) => println!("[resource {}]", resource.uri),
            Some(Kind::ResourceLink(link)) => println!("[link {} {}]", link.name, link.uri),
            None => {}
        }
    }
    if !response.structured_content_json.is_empty() {
        println!("{}", response.structured_content_json);
    }
    anyhow::ensure!(!response.is_error, "the tool reported an error");
    Ok(())
}

/// "NotFound: unknown tool ..." rather than tonic's long Display.
fn status_error(status: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{:?}: {}", status.code(), status.message())
}
