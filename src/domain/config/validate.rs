//! Semantic checks: the raw document → validated [`Config`], collecting every error with its
//! field path and carrying on past each one. Pure.

use std::{collections::HashMap, net::SocketAddr, path::PathBuf};

use serde_json::{Map, Value};

use super::{
    Config, ConfigError, DEFAULT_INIT_TIMEOUT, DEFAULT_SHUTDOWN_GRACE, DEFAULT_TIMEOUT, HttpMode,
    Isolation, MAX_PREFIX_LEN, MAX_UNIX_SOCKET_PATH, ServerSpec, TransportSpec, path,
    raw::{self, RawServer, RawTop, ServerForm},
};
use crate::domain::{
    caller::Template,
    expand::{ExpandError, Lookup, expand, expand_template},
    names::{ServerName, is_name_char},
    state::Readiness,
};

/// Validates the whole document, pushing every problem to `errors`.
pub(super) fn config(document: Value, lookup: Lookup<'_>, errors: &mut Vec<ConfigError>) -> Config {
    let mut map = match document {
        Value::Null => return Config::default(),
        Value::Object(map) => map,
        other => {
            let reason = format!("expected a mapping of settings, found {}", kind(&other));
            errors.push(ConfigError::new("", reason));
            return Config::default();
        }
    };
    let fields = serde_aux::serde_introspection::serde_introspect::<RawTop>();
    raw::remove_unknown_keys(&mut map, fields, None, "", errors);
    let (top, _) = raw::deserialize_all::<RawTop>(map, "", errors);
    let mut check = Checker { lookup, errors };
    // First: every server's entry is checked against the result limit it will run with.
    let limits = check.limits(top.limits);
    let (views, view_names) = check.views(top.views);
    let mut config = Config {
        listen: check.socket_addr(top.listen, "listen"),
        metrics_listen: check.socket_addr(top.metrics_listen, "metrics_listen"),
        mcp_listen: check.socket_addr(top.mcp_listen, "mcp_listen"),
        unix_listen: check.unix_socket_path(top.unix_listen),
        readiness: check.readiness(top.readiness),
        shutdown_grace: check.duration(
            top.shutdown_grace,
            DEFAULT_SHUTDOWN_GRACE,
            "shutdown_grace",
        ),
        max_connection_age: check.optional_duration(top.max_connection_age, "max_connection_age"),
        max_connection_age_grace: check
            .optional_duration(top.max_connection_age_grace, "max_connection_age_grace"),
        record_arguments: top.record_arguments.unwrap_or(false),
        auth: check.auth(top.auth),
        tls: check.tls(top.tls),
        reflection: top.reflection.unwrap_or(true),
        servers: check.servers(top.servers, top.mcp_servers, limits.max_result_bytes),
        limits,
        audit: check.audit(top.audit),
        tasks: check.tasks(top.tasks),
        state: check.shared_state(top.state),
        views,
        mcp_face: check.mcp_face(
            top.mcp_allowed_origins,
            top.mcp_sessions_per_caller,
            top.mcp_max_sessions,
        ),
    };
    check.token_views(&config.auth, &view_names);
    let first_kind = config.auth.first_kind();
    for server in &mut config.servers {
        if let Isolation::PerCaller(per_caller) = &mut server.isolation {
            per_caller.discovery.first_kind = first_kind;
        }
    }
    if config.max_connection_age_grace.is_some() && config.max_connection_age.is_none() {
        check.error(
            "max_connection_age_grace",
            "only applies with max_connection_age: add it, or remove this",
        );
    }
    if config.auth.client_ca.is_some() && config.tls.is_none() {
        check.error(
            "auth.client_ca",
            "client certificates need TLS: add a \"tls\" section with cert and key",
        );
    }
    config
}

/// One server entry before validation.
struct Entry {
    /// Its path: `servers[1]` or `mcpServers.memory`.
    at: String,
    form: ServerForm,
    /// The map key, for the map form.
    key: Option<String>,
    value: Value,
}

impl Entry {
    /// The path its errors start with: a list item also shows its `name`, so that
    /// `servers[3] (github).env.TOKEN` says which server without counting entries.
    fn shown(&self) -> String {
        match (&self.form, self.value.get("name").and_then(Value::as_str)) {
            (ServerForm::List, Some(name)) if !name.trim().is_empty() => {
                format!("{} ({})", self.at, name.escape_debug())
            }
            _ => self.at.clone(),
        }
    }
}

/// What the server entry around `oauth` says, for the checks that depend on it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Around {
    /// It has a `url`.
    pub over_http: bool,
    /// It is `transport: sse`.
    pub legacy_sse: bool,
    /// It has `isolation: per-caller`.
    pub per_caller: bool,
    /// It sets an `Authorization` header.
    pub authorization_header: bool,
    /// It has `token_exchange`.
    pub token_exchange: bool,
}

/// Carries the lookup and the error list through the checks.
pub(super) struct Checker<'a, 'e> {
    pub(super) lookup: Lookup<'a>,
    pub(super) errors: &'e mut Vec<ConfigError>,
}

impl Checker<'_, '_> {
    /// A nested section (a mapping): unknown keys reported, the rest deserialized into `T`.
    pub(super) fn section<T: serde::de::DeserializeOwned + Default>(
        &mut self,
        value: Option<Value>,
        at: &str,
    ) -> Option<T> {
        let map = match value? {
            Value::Null => return None,
            Value::Object(map) => map,
            other => {
                let reason = format!("expected a mapping, found {}", kind(&other));
                self.error(at, reason);
                return None;
            }
        };
        let mut map = map;
        let fields = serde_aux::serde_introspection::serde_introspect::<T>();
        raw::remove_unknown_keys(&mut map, fields, None, at, self.errors);
        Some(raw::deserialize_all::<T>(map, at, self.errors).0)
    }
}

impl Checker<'_, '_> {
    /// Reports a problem at `at`.
    pub(super) fn error(&mut self, at: &str, reason: impl Into<String>) {
        self.errors.push(ConfigError::new(at, reason));
    }

    /// Expands `${VAR}` references; `None` (with the errors reported) when that fails.
    pub(super) fn expand(&mut self, text: &str, at: &str) -> Option<String> {
        match expand(text, self.lookup) {
            Ok(expanded) => Some(expanded),
            Err(error) => {
                self.expansion_error(error, at);
                None
            }
        }
    }

    /// Reports an expansion error; one per unset variable, so each reads "environment variable
    /// X is not set".
    fn expansion_error(&mut self, error: ExpandError, at: &str) {
        match error {
            ExpandError::Unset(names) => {
                for name in names {
                    self.error(at, ExpandError::Unset(vec![name]).to_string());
                }
            }
            error => self.error(at, error.to_string()),
        }
    }

    /// Expands a field that may hold caller values (when `per_caller`); elsewhere a caller
    /// value is an error naming the field.
    pub(super) fn template(&mut self, text: &str, at: &str, per_caller: bool) -> Option<Template> {
        if !per_caller {
            return self.expand(text, at).map(Template::text);
        }
        match expand_template(text, self.lookup) {
            Ok(template) => Some(template),
            Err(error) => {
                self.expansion_error(error, at);
                None
            }
        }
    }

    /// A `host:port` address with an IP host (names are not resolved here: this code is pure).
    fn socket_addr(&mut self, raw: Option<String>, at: &str) -> Option<SocketAddr> {
        let raw = raw?;
        let text = self.expand(&raw, at)?;
        match text.trim().parse() {
            Ok(addr) => Some(addr),
            Err(_) if text.trim().starts_with("unix:") => {
                let reason = format!(
                    "{raw:?} is a Unix socket; `{at}` takes an IP address and a port: put the socket \
                     in `unix_listen`"
                );
                self.error(at, reason);
                None
            }
            Err(_) => {
                let reason = format!(
                    "invalid socket address {raw:?}; expected an IP address and a port, like 0.0.0.0:50051"
                );
                self.error(at, reason);
                None
            }
        }
    }

    /// A Unix socket's path (`unix:` in front allowed, as gRPC clients write it): absolute or
    /// relative, not a directory, and short enough for `sun_path`.
    fn unix_socket_path(&mut self, raw: Option<String>) -> Option<PathBuf> {
        const AT: &str = "unix_listen";
        let raw = raw?;
        let text = self.expand(&raw, AT)?;
        let path = text.trim();
        let path = path
            .strip_prefix("unix://")
            .or_else(|| path.strip_prefix("unix:"))
            .unwrap_or(path);
        let problem = if path.is_empty() {
            Some("is empty; give the socket's path, like /run/toolbroker/grpc.sock".to_owned())
        } else if path.ends_with('/') {
            Some(format!(
                "{path:?} names a directory; give the socket file's path, like {path}grpc.sock"
            ))
        } else if path.len() > MAX_UNIX_SOCKET_PATH {
            Some(format!(
                "{path:?} is {} bytes long; a Unix socket's path may have at most {MAX_UNIX_SOCKET_PATH}",
                path.len()
            ))
        } else {
            None
        };
        match problem {
            Some(reason) => {
                self.error(AT, reason);
                None
            }
            None => Some(PathBuf::from(path)),
        }
    }

    /// `first-attempt` (the default) or `all`.
    fn readiness(&mut self, raw: Option<String>) -> Readiness {
        const VALUES: [&str; 2] = ["first-attempt", "all"];
        match raw.as_deref() {
            None | Some("first-attempt") => Readiness::FirstAttempt,
            Some("all") => Readiness::All,
            Some(other) => {
                let hint = raw::suggest(other, &VALUES);
                self.error("readiness", format!("unknown readiness {other:?}; {hint}"));
                Readiness::default()
            }
        }
    }

    /// The `servers` list (or map) then the `mcpServers` map, checked in file order.
    fn servers(
        &mut self,
        list: Option<Value>,
        map: Option<Map<String, Value>>,
        max_result_bytes: usize,
    ) -> Vec<ServerSpec> {
        let mut entries = Vec::new();
        match list {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                entries.extend(items.into_iter().enumerate().map(|(i, value)| Entry {
                    at: path::index("servers", i),
                    form: ServerForm::List,
                    key: None,
                    value,
                }))
            }
            Some(Value::Object(servers)) => entries.extend(map_entries("servers", servers)),
            Some(other) => {
                let reason = format!("expected a list of servers, found {}", kind(&other));
                self.error("servers", reason);
            }
        }
        entries.extend(map_entries("mcpServers", map.unwrap_or_default()));
        let mut seen = HashMap::new();
        entries
            .into_iter()
            .filter_map(|entry| self.server(entry, &mut seen, max_result_bytes))
            .collect()
    }

    /// Validates one entry; `seen` maps each name so far to where it was first defined.
    fn server(
        &mut self,
        entry: Entry,
        seen: &mut HashMap<ServerName, String>,
        max_result_bytes: usize,
    ) -> Option<ServerSpec> {
        let before = self.errors.len();
        let at = entry.shown();
        let at = at.as_str();
        let Value::Object(mut map) = entry.value else {
            let reason = format!(
                "expected a mapping of server fields, found {}",
                kind(&entry.value)
            );
            self.error(at, reason);
            return None;
        };
        raw::remove_unknown_keys(
            &mut map,
            &entry.form.fields(),
            Some(entry.form),
            at,
            self.errors,
        );
        let (mut raw, dropped) = raw::deserialize_all::<RawServer>(map, at, self.errors);
        let name = self.server_name(entry.key, raw.name.take(), at, &dropped, seen);
        let over_http = raw.url.is_some() && raw.command.is_none();
        let isolation = self.isolation(&mut raw, at);
        let per_caller = matches!(isolation, Isolation::PerCaller(_));
        let replicas = self.replicas(raw.replicas.take(), over_http, per_caller, at);
        let transport = self.transport(&mut raw, at, &dropped, per_caller);
        let token_exchange =
            self.token_exchange(raw.token_exchange.take(), at, per_caller && over_http);
        let around = Around {
            over_http,
            legacy_sse: matches!(&transport, Some(TransportSpec::Http(http)) if http.mode == HttpMode::Sse),
            per_caller,
            authorization_header: matches!(&transport, Some(TransportSpec::Http(http))
                if http.headers.keys().any(|name| name.eq_ignore_ascii_case("authorization"))),
            token_exchange: token_exchange.is_some(),
        };
        let oauth = self.oauth(raw.oauth.take(), at, around);
        let rate = self.rate(raw.rate.take(), &path::field(at, "rate"));
        let caller_rate = self.rate(raw.caller_rate.take(), &path::field(at, "caller_rate"));
        let concurrency = self.concurrency(&mut raw, at);
        let prefix = self.prefix(raw.prefix, at);
        let tools = self.tools(raw.tools, &prefix, at);
        let timeout_at = path::field(at, "timeout");
        let timeout = self.duration(raw.timeout, DEFAULT_TIMEOUT, &timeout_at);
        let max_timeout = self.max_timeout(raw.max_timeout, timeout, at);
        let roots = self.roots(raw.roots, at);
        let init_at = path::field(at, "init_timeout");
        let init_timeout = self.duration(raw.init_timeout, DEFAULT_INIT_TIMEOUT, &init_at);
        let backoff = self.backoff(raw.backoff_initial, raw.backoff_max, at);
        let spec = ServerSpec {
            name: name?,
            transport: transport?,
            tools,
            prefix,
            timeout,
            max_timeout,
            roots,
            init_timeout,
            backoff,
            concurrency,
            max_result_bytes,
            replicas,
            isolation,
            token_exchange,
            oauth,
            rate,
            caller_rate,
        };
        (self.errors.len() == before).then_some(spec)
    }

    /// The entry's name (its map key, or its `name` field), checked and unique so far.
    fn server_name(
        &mut self,
        key: Option<String>,
        field: Option<String>,
        at: &str,
        dropped: &[String],
        seen: &mut HashMap<ServerName, String>,
    ) -> Option<ServerName> {
        let (text, name_at) = match (key, field) {
            (Some(key), _) => (key, at.to_owned()),
            (None, Some(name)) => (name, path::field(at, "name")),
            // A name of the wrong type was reported already.
            (None, None) if dropped.iter().any(|k| k == "name") => return None,
            (None, None) => {
                self.error(at, "missing field \"name\"");
                return None;
            }
        };
        let name = match ServerName::parse(&text) {
            Ok(name) => name,
            Err(reason) => {
                self.error(&name_at, format!("invalid server name: {reason}"));
                return None;
            }
        };
        if let Some(first) = seen.get(&name) {
            let reason = format!(
                "duplicate server name {:?}; first defined at {first}",
                name.as_str()
            );
            self.error(&name_at, reason);
            return None;
        }
        seen.insert(name.clone(), at.to_owned());
        Some(name)
    }

    /// Letters, digits, `_` and `-`, at most [`MAX_PREFIX_LEN`]: exposed names must stay valid.
    fn prefix(&mut self, raw: Option<String>, at: &str) -> String {
        let prefix = raw.unwrap_or_default();
        let at = path::field(at, "prefix");
        if let Some(bad) = prefix.chars().find(|c| !is_name_char(*c)) {
            let reason = format!(
                "prefix {prefix:?} contains {bad:?}; use only letters, digits, '_' and '-'"
            );
            self.error(&at, reason);
        }
        let len = prefix.chars().count();
        if len > MAX_PREFIX_LEN {
            let reason = format!(
                "prefix {prefix:?} is {len} characters long; at most {MAX_PREFIX_LEN} are allowed"
            );
            self.error(&at, reason);
        }
        prefix
    }
}

/// The entries of a map of servers, each at `at.key`.
fn map_entries(at: &'static str, map: Map<String, Value>) -> impl Iterator<Item = Entry> {
    map.into_iter().map(move |(key, value)| Entry {
        at: path::field(at, &key),
        form: ServerForm::Map,
        key: Some(key),
        value,
    })
}

/// How a JSON value's type is named in messages.
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}
