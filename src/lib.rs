//! toolbroker: serves the tools of many MCP servers to agents over one gRPC contract.
//!
//! Layers, each importing only those below it (checked on every test run by
//! `tests/it/layering.rs`):
//! - `domain`: pure rules (config, names, schemas, the catalog, call rules, the error table,
//!   grants, views, how a caller renders); no I/O, nothing else of the crate.
//! - `upstream` (MCP sessions with the servers: `transport/{stdio,http,sse}`, `session`,
//!   `pool`, `supervisor`, `oauth`), `conversation` (the channel of a streaming call, shared by
//!   upstream and the faces), `http2` (below tonic and h2: framing, the socket's authority,
//!   batched writes), `net`, `tls`, `tls_provider`, `telemetry`, `metrics`, `auth` (who is
//!   calling), `foreign_errors` (dependency error texts, read in one place), `proto`
//!   (generated types, ListTools' cached encoding, Struct ↔ JSON).
//! - `core`: the broker (the catalog's single writer) and the one call path every face uses
//!   (shutdown, view, grants, audit, rates, schema, timeout, in flight), rates and the audit
//!   log. It imports no face; `upstream` never imports it.
//! - `faces`: `faces::grpc` (the tonic service), `faces::mcp::http` (the MCP face over
//!   streamable HTTP), `faces::mcp::stdio` (the stdio bridge, a gRPC client of the broker),
//!   sharing `faces::mcp::model` (one projection of tools, resources and prompts, one refusal
//!   table) and `faces::mcp::lists`. No face imports another.
//! - The shell: `app` (builds and runs it all), `cli`, `config_file`, `reload`, `health`,
//!   `login`, `client` (`toolbroker tools` and `call`), `demo_server`.

// The one exception, setting a child's parent-death signal, is allowed where it is.
#![deny(unsafe_code)]

pub mod app;
pub(crate) mod auth;
pub mod cli;
pub mod client;
pub mod config_file;
pub(crate) mod conversation;
pub(crate) mod core;
pub mod demo_server;
pub mod domain;
pub mod faces;
pub(crate) mod foreign_errors;
pub mod health;
pub mod http2;
pub mod login;
pub(crate) mod metrics;
pub(crate) mod net;
pub mod proto;
pub(crate) mod reload;
pub(crate) mod shared_state;
pub mod telemetry;
pub(crate) mod tls;
pub mod tls_provider;
pub mod upstream;
