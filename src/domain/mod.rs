//! The pure core: configuration, names, schema conversion, the catalog and call rules.
//! Nothing here does I/O, reads the clock or the environment: what comes from the world is a
//! parameter.

pub(crate) mod audit;
pub(crate) mod backoff;
pub mod call;
pub(crate) mod caller;
pub(crate) mod catalog;
pub mod config;
pub(crate) mod expand;
pub(crate) mod grants;
pub(crate) mod icon;
pub mod names;
pub(crate) mod offer;
pub(crate) mod origin;
pub(crate) mod outcome;
pub(crate) mod overrides;
pub(crate) mod paths;
pub(crate) mod redact;
pub(crate) mod reload;
pub(crate) mod replicas;
pub mod request_error;
pub mod schema;
pub(crate) mod schema_text;
pub mod search;
pub(crate) mod state;
pub(crate) mod token_lifetime;
pub mod tool;
pub(crate) mod uri_template;
pub(crate) mod views;
