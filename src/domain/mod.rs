//! The pure core: configuration, names, schema conversion, the catalog and call rules.
//! Nothing here does I/O, reads the clock or the environment: what comes from the world is a
//! parameter.

pub mod audit;
pub mod backoff;
pub mod call;
pub mod caller;
pub mod catalog;
pub mod config;
pub mod expand;
pub mod grants;
pub mod names;
pub mod offer;
pub mod origin;
pub mod outcome;
pub mod overrides;
pub mod paths;
pub mod redact;
pub mod reload;
pub mod replicas;
pub mod request_error;
pub mod schema;
pub mod schema_text;
pub mod search;
pub mod state;
pub mod token_lifetime;
pub mod tool;
pub mod uri_template;
pub mod views;
