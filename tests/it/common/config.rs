//! Broker configs as data: server entries from small constructors with chainable setters, and
//! top-level settings, serialized to JSON (which is YAML) for the broker to read. Nothing here
//! assembles YAML text, so no test depends on indentation.

use serde_json::{Map, Value};

use super::{everything_js, toolbroker_bin};

/// One entry of `servers:`, e.g. `demo("demo").prefix("d_").set("replicas", 3)`.
#[derive(Debug, Clone)]
pub struct Server(Map<String, Value>);

impl Server {
    /// An entry with only its name.
    fn named(name: &str) -> Self {
        Self(Map::from_iter([("name".to_owned(), Value::from(name))]))
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.0["name"].as_str().expect("a name is a string")
    }

    /// Sets field `key` to `value` (any JSON value: `3`, `"10s"`, `true`, `json!([..])`).
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0.insert(key.to_owned(), value.into());
        self
    }

    /// Sets `prefix:`, put before each of its tool names.
    pub fn prefix(self, prefix: &str) -> Self {
        self.set("prefix", prefix)
    }

    /// Appends command-line arguments (for the demo, after `demo-server`).
    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        let mut args = args
            .into_iter()
            .map(|arg| Value::String(arg.into()))
            .peekable();
        if args.peek().is_some() {
            let list = self
                .0
                .entry("args")
                .or_insert_with(|| Value::Array(Vec::new()));
            list.as_array_mut().expect("args is a list").extend(args);
        }
        self
    }
}

/// A stdio server running `program` with `args`.
pub fn command(name: &str, program: &str, args: &[&str]) -> Server {
    Server::named(name)
        .set("command", program)
        .args(args.iter().copied())
}

/// Our demo server over stdio.
pub fn demo(name: &str) -> Server {
    command(name, toolbroker_bin(), &["demo-server"])
}

/// Our demo server over stdio, started by `sh` after running `script` (which may print, start
/// a background process, or wait for something first).
pub fn demo_after(name: &str, script: &str) -> Server {
    // `sh -c SCRIPT BIN`: the script sees our binary as $0. A line break, not `;`, ends the
    // script's part, which may end in `&`.
    let script = format!("{script}\nexec \"$0\" demo-server");
    command(name, "sh", &["-c", &script, toolbroker_bin()])
}

/// server-everything over stdio.
pub fn everything(name: &str) -> Server {
    let js = everything_js().display().to_string();
    command(name, "node", &[&js, "stdio"])
}

/// `tests/python/interactive_mcp_server.py` over stdio (progress, elicitation, sampling,
/// resources, prompts, roots; see its docstring).
pub fn interactive(name: &str) -> Server {
    let python = super::python::python().display().to_string();
    let script = super::repo().join("tests/python/interactive_mcp_server.py");
    command(name, &python, &[&script.display().to_string()])
}

/// `tests/python/modern_mcp_server.py` over stdio: a server that speaks only 2026-07-28 and
/// asks in rounds (see its docstring).
pub fn modern(name: &str) -> Server {
    let python = super::python::python().display().to_string();
    let script = super::repo().join("tests/python/modern_mcp_server.py");
    command(name, &python, &[&script.display().to_string()])
}

/// server-memory over stdio (its knowledge graph in the file `MEMORY_FILE_PATH` names).
pub fn memory(name: &str) -> Server {
    let js = super::memory_js().display().to_string();
    command(name, "node", &[&js])
}

/// A remote server at `url` (the transport detected unless set with `.set("transport", ..)`).
pub fn url_server(name: &str, url: &str) -> Server {
    Server::named(name).set("url", url)
}

/// A whole config: top-level settings, then `servers:`.
#[derive(Debug, Clone, Default)]
pub struct Config {
    top: Map<String, Value>,
    servers: Vec<Server>,
}

impl Config {
    /// An empty config.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets top-level field `key` (e.g. `shutdown_grace`, `auth`, `limits`).
    pub fn top(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.top.insert(key.to_owned(), value.into());
        self
    }

    /// Adds a server entry after those already there.
    pub fn server(mut self, server: Server) -> Self {
        self.servers.push(server);
        self
    }

    /// The config file's text: JSON, which the broker reads as YAML.
    pub fn text(&self) -> String {
        let mut whole = self.top.clone();
        if !self.servers.is_empty() {
            let servers = self.servers.iter().map(|s| Value::Object(s.0.clone()));
            whole.insert("servers".to_owned(), Value::Array(servers.collect()));
        }
        serde_json::to_string_pretty(&whole).expect("a JSON map always serializes")
    }
}
