//! `toolbroker login SERVER --config FILE`: a person authorizes the broker for one shared HTTP
//! server (`oauth` without client credentials): discovery as the MCP authorization spec says,
//! the authorization-code flow with PKCE and the `resource` parameter, a redirect to a loopback
//! listener, and the tokens written to the server's token store (mode 0600) for the broker to
//! use and refresh; with `state.redis` in the config, to Redis instead, for every replica (and
//! nowhere if Redis cannot be reached: the login fails). The client is the configured one, else
//! a client ID metadata document where the authorization server takes one, else one registered
//! dynamically (RFC 7591).

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use anyhow::{Context as _, anyhow, bail};
use axum::{Router, extract::RawQuery, response::Html, routing::get};
use rmcp::transport::auth::{AuthorizationRequest, AuthorizationSession, StoredCredentials};
use tokio::{net::TcpListener, sync::mpsc};
use url::Url;

use crate::{
    cli::LoginArgs,
    config_file,
    domain::config::{Grant, Login, ServerSpec, TransportSpec},
    shared_state::Shared,
    upstream::{
        oauth::{
            discovery::{challenge, discover},
            scopes::{split, union},
            shared::SharedTokens,
            store::{TokenFile, TokenStore},
        },
        session::connect::Resolved,
        transport::http,
    },
};

/// The client name sent with dynamic registration.
const CLIENT_NAME: &str = "toolbroker";
/// The redirect path when none is configured.
const CALLBACK_PATH: &str = "/callback";

/// Runs the login; errors say what to fix. A config that does not allow it is a config error.
pub async fn login(args: &LoginArgs) -> anyhow::Result<()> {
    let loaded = config_file::load(&args.config)?;
    let spec = loaded
        .config
        .servers
        .iter()
        .find(|spec| spec.name.as_str() == args.server)
        .ok_or_else(|| {
            anyhow!(
                "{}: no server named {:?}",
                args.config.display(),
                args.server
            )
        })?;
    let login = login_spec(spec).map_err(|why| anyhow!("{}: {why}", args.config.display()))?;
    let TransportSpec::Http(http_spec) = &spec.transport else {
        unreachable!("login_spec checked it is an HTTP server")
    };
    let url = Url::parse(&http_spec.url).context("the server's url")?;
    let client = http::client().map_err(|e| anyhow!("{e}"))?;
    let discovery = spec.discovery_caller();
    let headers = match Resolved::of(spec, &discovery) {
        Ok(Resolved::Http(endpoint)) => {
            http::headers(&endpoint.headers).map_err(|e| anyhow!("{e}"))?
        }
        Ok(Resolved::Stdio(_)) => unreachable!("an HTTP server"),
        Err(missing) => bail!("the server's headers need {missing}"),
    };

    let challenge = challenge(&client, &url, headers, &spec.name).await?;
    let found = discover(&url, challenge.clone()).await?;
    let mut manager = found.manager;

    let destination = match &loaded.config.state {
        Some(state) => {
            let replica = format!("login-{:016x}", fastrand::u64(..));
            let shared = Shared::connect(state, replica).map_err(|e| anyhow!(e))?;
            Destination::Redis(SharedTokens::new(shared, &spec.name))
        }
        None => Destination::File(login.token_store.clone()),
    };
    let (listener, redirect_uri) = listen(login).await?;
    let path = Url::parse(&redirect_uri)?.path().to_owned();
    let (store, previous) = match &destination {
        Destination::File(path) => {
            let store = TokenStore::new(path.clone());
            let previous = store.reload().ok().flatten();
            (store, previous)
        }
        // Read first: a Redis that cannot be reached fails the login before the browser.
        Destination::Redis(tokens) => {
            let previous = tokens
                .read::<TokenFile>()
                .await
                .map_err(|e| unreachable(tokens, &e))?;
            (TokenStore::in_memory(tokens.shown().into()), previous)
        }
    };

    // Scope: the configured one, else what the challenge or the resource suggests; plus what
    // the server asked for since the last login (step-up).
    let configured = spec.oauth.as_ref().map(|oauth| oauth.scopes.clone());
    let mut scopes = configured.unwrap_or_default();
    if let Some(previous) = &previous
        && previous.step_up.is_some()
    {
        if scopes.is_empty() {
            scopes = manager.select_initial_scopes(&[]).await;
        }
        scopes = union(&scopes, &previous.credentials.granted_scopes);
        scopes = union(&scopes, &split(previous.step_up.as_deref()));
    }

    let mut request = AuthorizationRequest::new(&redirect_uri).with_client_name(CLIENT_NAME);
    if let Some(challenge) = &challenge {
        request = request.with_challenge(challenge);
    }
    request = if scopes.is_empty() {
        request.with_initial_scope_selection()
    } else {
        request.with_scopes(scopes.clone())
    };
    let supports_metadata_documents = found
        .metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    // The secret dynamic registration gives goes to the store: refreshing needs it.
    let mut registered_secret = None;
    let client_id = if let Some(client_id) = &login.client_id {
        request = request.with_preregistered_client(client_id);
        if let Some(secret) = &login.client_secret {
            request = request.with_client_secret(secret.expose());
        }
        client_id.clone()
    } else if let Some(document) = login
        .client_metadata_url
        .as_ref()
        .filter(|_| supports_metadata_documents)
    {
        request = request.with_client_metadata_url(document);
        document.clone()
    } else {
        if found.metadata.registration_endpoint.is_none() {
            bail!(
                "the authorization server of {url} offers no dynamic client registration and \
                 takes no client ID metadata document: register a client there and set \
                 oauth.client_id (and client_secret_env if it has a secret)"
            );
        }
        let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
        let registered = manager
            .register_client(CLIENT_NAME, &redirect_uri, &scope_refs)
            .await
            .map_err(|e| anyhow!("dynamic client registration failed: {e}"))?;
        request = request.with_preregistered_client(&registered.client_id);
        if let Some(secret) = &registered.client_secret {
            request = request.with_client_secret(secret);
        }
        registered_secret = registered.client_secret.clone();
        registered.client_id
    };

    // rmcp saves the tokens through the store, which then writes the file whole (or keeps
    // them for Redis).
    store.hold(TokenFile {
        server_url: url.to_string(),
        client_id: client_id.clone(),
        client_secret: registered_secret,
        redirect_uri: redirect_uri.clone(),
        metadata: found.metadata.clone(),
        credentials: StoredCredentials::new(client_id.clone(), None, Vec::new(), None),
        step_up: None,
    });
    manager.set_credential_store(store.clone());
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| anyhow!("cannot start the authorization: {e}"))?;

    // The URL first, alone on stdout: scripts and tests follow it.
    println!("{}", session.get_authorization_url());
    eprintln!(
        "toolbroker login: open the URL above in a browser to authorize the broker for {}; \
         waiting for the redirect to {redirect_uri} (at most {} s)",
        spec.name,
        args.timeout.as_secs()
    );
    if !args.no_browser {
        open_browser(session.get_authorization_url());
    }
    let callback = wait_for_redirect(listener, &path, &redirect_uri, args.timeout).await?;
    if let Destination::File(file) = &destination
        && let Some(parent) = file.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    session
        .handle_callback_url(&callback)
        .await
        .map_err(|e| anyhow!("the authorization code was not exchanged for tokens: {e}"))?;
    match &destination {
        Destination::File(path) => eprintln!(
            "toolbroker login: tokens for {} written to {}; a running broker takes them on SIGHUP",
            spec.name,
            path.display()
        ),
        Destination::Redis(tokens) => {
            let file = store
                .current()
                .ok_or_else(|| anyhow!("the authorization server gave no tokens"))?;
            write_shared(tokens, &file).await?;
            eprintln!(
                "toolbroker login: tokens for {} written to {}; running brokers take them \
                 when they next need a token (at once on SIGHUP)",
                spec.name,
                tokens.shown()
            );
        }
    }
    Ok(())
}

/// Where the tokens go.
enum Destination {
    /// The server's token store file.
    File(PathBuf),
    /// The shared Redis (`state.redis`).
    Redis(SharedTokens),
}

/// Writes `file` to Redis under the tokens' lock, so that a broker refreshing the tokens of a
/// previous login does not write them over the new ones.
async fn write_shared(tokens: &SharedTokens, file: &TokenFile) -> anyhow::Result<()> {
    let lock = tokens
        .lock()
        .await
        .map_err(|e| unreachable(tokens, &e))?
        .ok_or_else(|| {
            anyhow!(
                "the lock of the tokens in {} stayed taken: nothing was stored; run login \
                 again",
                tokens.shown()
            )
        })?;
    let written = tokens.write(file, None).await;
    lock.release().await;
    written.map_err(|e| unreachable(tokens, &e))
}

/// Why the login fails when Redis cannot be reached.
fn unreachable(tokens: &SharedTokens, error: &redis::RedisError) -> anyhow::Error {
    anyhow!(
        "the config keeps tokens in Redis (state.redis), and {} cannot be reached ({error}): \
         nothing was stored; run login again once it is reachable",
        tokens.shown()
    )
}

/// The server's login settings, or why it has none.
fn login_spec(spec: &ServerSpec) -> Result<&Login, String> {
    match spec.oauth.as_ref().map(|oauth| &oauth.grant) {
        Some(Grant::Login(login)) => Ok(login),
        Some(Grant::ClientCredentials(_)) => Err(format!(
            "server {:?} uses client credentials (oauth.client_id with a secret or key): the \
             broker gets its tokens itself, no login needed",
            spec.name.as_str()
        )),
        Some(Grant::CrossApp(_)) => Err(format!(
            "server {:?} gets each caller's token by cross-app access: no login needed",
            spec.name.as_str()
        )),
        None => Err(format!(
            "server {:?} has no oauth section: nothing to log in to",
            spec.name.as_str()
        )),
    }
}

/// The loopback listener for the redirect, and the redirect URI: the configured one (its port),
/// else `http://127.0.0.1:<free port>/callback`.
async fn listen(login: &Login) -> anyhow::Result<(TcpListener, String)> {
    match &login.redirect_uri {
        Some(uri) => {
            let parsed = Url::parse(uri)?;
            let host = parsed.host_str().unwrap_or("127.0.0.1");
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let host = if host == "localhost" {
                "127.0.0.1"
            } else {
                host
            };
            let port = parsed.port_or_known_default().unwrap_or(80);
            let addr: SocketAddr = format!("{host}:{port}")
                .parse()
                .or_else(|_| format!("[{host}]:{port}").parse())
                .with_context(|| format!("redirect_uri {uri}"))?;
            let listener = TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} for redirect_uri {uri}"))?;
            Ok((listener, uri.clone()))
        }
        None => {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .context("cannot listen on 127.0.0.1 for the redirect")?;
            let port = listener.local_addr()?.port();
            Ok((listener, format!("http://127.0.0.1:{port}{CALLBACK_PATH}")))
        }
    }
}

/// Serves `path` until the first redirect with a code (or an error) arrives, at most `timeout`;
/// the redirect URL with its query.
async fn wait_for_redirect(
    listener: TcpListener,
    path: &str,
    redirect_uri: &str,
    timeout: Duration,
) -> anyhow::Result<String> {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let app = Router::new().route(
        path,
        get(move |RawQuery(query): RawQuery| {
            let tx = tx.clone();
            async move {
                let query = query.unwrap_or_default();
                let _ = tx.send(query);
                Html(
                    "<!doctype html><title>toolbroker</title><p>Done: you can close this tab \
                     and go back to the terminal.</p>",
                )
            }
        }),
    );
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let received = tokio::time::timeout(timeout, async {
        loop {
            let Some(query) = rx.recv().await else {
                return Err(anyhow!("the redirect listener stopped"));
            };
            let params: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect();
            let get = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v);
            if let Some(error) = get("error") {
                let description = get("error_description")
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                return Err(anyhow!(
                    "the authorization server refused the authorization ({error}{description})"
                ));
            }
            if get("code").is_some() {
                let base = redirect_uri.split('?').next().unwrap_or(redirect_uri);
                return Ok(format!("{base}?{query}"));
            }
            // Something else (a favicon, a stray request): keep waiting.
        }
    })
    .await;
    server.abort();
    match received {
        Ok(result) => result,
        Err(_) => bail!(
            "no redirect to {redirect_uri} within {} s: run login again (a larger --timeout?)",
            timeout.as_secs()
        ),
    }
}

/// Tries the desktop's browser; the URL is printed anyway.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if spawned.is_err() {
        eprintln!("toolbroker login: no browser opener ({opener}); open the URL by hand");
    }
}
