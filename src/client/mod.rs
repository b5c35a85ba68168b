//! `toolbroker tools` and `toolbroker call`: a terminal's view of a running broker.

mod stream;

use anyhow::Context as _;
use tonic::{
    metadata::{Ascii, MetadataValue},
    service::{Interceptor, interceptor::InterceptedService},
    transport::{Certificate, ClientTlsConfig},
};

use crate::{
    cli::{CallArgs, ClientArgs, SearchArgs, ToolsArgs},
    proto::{self, content::Kind, tool_broker_client::ToolBrokerClient},
};

/// A client that sends `authorization: Bearer <token>` when a token is given; cheap to clone
/// (one channel), so concurrent requests each take their own.
pub(crate) type Client = ToolBrokerClient<InterceptedService<tonic::transport::Channel, Bearer>>;

/// Adds the bearer token, if any, to every request.
#[derive(Clone)]
pub(crate) struct Bearer(Option<MetadataValue<Ascii>>);

impl Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(bearer) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", bearer.clone());
        }
        Ok(request)
    }
}

/// Connects to the broker at `args.addr`, with `args.token` as the bearer token.
pub(crate) async fn connect(args: &ClientArgs) -> anyhow::Result<Client> {
    let uri = endpoint_uri(&args.addr);
    let mut endpoint = tonic::transport::Endpoint::from_shared(uri.clone())
        .with_context(|| format!("bad broker address {}", args.addr))?;
    if uri.starts_with("https://") {
        endpoint = endpoint.tls_config(tls(args)?)?;
    }
    let channel = endpoint
        .connect()
        .await
        .with_context(|| format!("cannot connect to {}", args.addr))?;
    let bearer: Option<MetadataValue<Ascii>> = args
        .token
        .as_ref()
        .map(|token| format!("Bearer {token}").parse())
        .transpose()
        .context("the token holds characters a header cannot")?;
    Ok(ToolBrokerClient::with_interceptor(channel, Bearer(bearer)))
}

/// The URI to reach a broker at `addr`: `http://…`, `https://…` and `unix:…` as given; a
/// plain `host:port`, as grpcurl and most gRPC tools take it, over plaintext HTTP/2 (a
/// broker with TLS needs its `https://`).
fn endpoint_uri(addr: &str) -> String {
    if addr.contains("://") || addr.starts_with("unix:") {
        addr.to_owned()
    } else {
        format!("http://{addr}")
    }
}

/// TLS to the broker: the system's roots, or the CA of `--ca-cert`.
fn tls(args: &ClientArgs) -> anyhow::Result<ClientTlsConfig> {
    let config = ClientTlsConfig::new();
    Ok(match &args.ca_cert {
        None => config.with_native_roots(),
        Some(path) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("--ca-cert {}: cannot read it", path.display()))?;
            config.ca_certificate(Certificate::from_pem(pem))
        }
    })
}

/// Prints every tool (of the view asked for): name, server and description.
pub async fn list_tools(args: &ToolsArgs) -> anyhow::Result<()> {
    let request = proto::ListToolsRequest {
        view: args.view.clone().unwrap_or_default(),
        ..Default::default()
    };
    let response = connect(&args.client)
        .await?
        .list_tools(request)
        .await
        .map_err(status_error)?
        .into_inner();
    print(&listing(&response.tools))
}

/// Prints the best matches for the query, best first, as `tools` prints tools.
pub async fn search(args: &SearchArgs) -> anyhow::Result<()> {
    let request = proto::SearchToolsRequest {
        query: args.query.clone(),
        limit: args.limit,
        view: args.view.clone().unwrap_or_default(),
        ..Default::default()
    };
    let response = connect(&args.client)
        .await?
        .search_tools(request)
        .await
        .map_err(status_error)?
        .into_inner();
    let tools: Vec<proto::Tool> = response
        .matches
        .into_iter()
        .filter_map(|m| m.tool)
        .collect();
    if tools.is_empty() {
        eprintln!("no tool matches {:?}", args.query);
    }
    print(&listing(&tools))
}

/// The tools as `tools` prints them: `name(param: type, optional?: type)  [server]`, then the
/// description indented.
fn listing(tools: &[proto::Tool]) -> String {
    let mut out = String::new();
    for tool in tools {
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
        out.push_str(&format!(
            "{}({})  [{}]\n",
            tool.name,
            params.join(", "),
            tool.server
        ));
        if !tool.description.is_empty() {
            out.push_str(&format!("    {}\n", tool.description));
        }
    }
    out
}

/// Writes `text` to stdout; a reader that stopped reading (`| head`) is no error.
fn print(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(error).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}

/// Calls a tool (over CallToolStream with `--stream`) and prints its result; a tool error
/// exits non-zero.
pub async fn call(args: &CallArgs) -> anyhow::Result<()> {
    let request = proto::CallToolRequest {
        name: args.name.clone(),
        arguments_json: args.arguments.clone(),
        ..Default::default()
    };
    let mut client = connect(&args.client).await?;
    let response = if args.stream {
        stream::call(&mut client, request, stream::Answers::of(args)?).await?
    } else {
        client
            .call_tool(request)
            .await
            .map_err(status_error)?
            .into_inner()
    };
    print(&rendering(&response))?;
    anyhow::ensure!(!response.is_error, "the tool reported an error");
    Ok(())
}

/// A call's result as `call` prints it: each content block on a line of its own (text as it
/// is, other blocks described), then the structured content.
fn rendering(response: &proto::CallToolResponse) -> String {
    let mut out = String::new();
    for content in &response.content {
        let line = match &content.kind {
            Some(Kind::Text(text)) => text.text.clone(),
            Some(Kind::Image(image)) => {
                format!("[image {} bytes {}]", image.mime_type, image.data.len())
            }
            Some(Kind::Audio(audio)) => {
                format!("[audio {} bytes {}]", audio.mime_type, audio.data.len())
            }
            Some(Kind::Resource(resource)) => format!("[resource {}]", resource.uri),
            Some(Kind::ResourceLink(link)) => format!("[link {} {}]", link.name, link.uri),
            None => continue,
        };
        out.push_str(&line);
        out.push('\n');
    }
    if !response.structured_content_json.is_empty() {
        out.push_str(&response.structured_content_json);
        out.push('\n');
    }
    out
}

/// "NotFound: unknown tool ..." rather than tonic's long Display.
pub(crate) fn status_error(status: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{:?}: {}", status.code(), status.message())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_host_and_port_is_plaintext_and_other_forms_stay_as_given() {
        let cases = [
            ("127.0.0.1:50051", "http://127.0.0.1:50051"),
            ("[::1]:50051", "http://[::1]:50051"),
            ("tools.example.com:443", "http://tools.example.com:443"),
            ("http://127.0.0.1:50051", "http://127.0.0.1:50051"),
            ("https://tools.example.com", "https://tools.example.com"),
            (
                "unix:///run/toolbroker/grpc.sock",
                "unix:///run/toolbroker/grpc.sock",
            ),
            ("unix:relative.sock", "unix:relative.sock"),
        ];
        for (addr, uri) in cases {
            assert_eq!(endpoint_uri(addr), uri, "{addr}");
        }
    }
}
