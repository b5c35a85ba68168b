//! One MCP session with one server: starting it on its transport (`connect`), what the broker
//! tells the server about itself (`client_handler`), the running session (`running`), the
//! requests calls send through it (`requests`), what the server sends back during a request
//! (`interactions`) or asks for in rounds on 2026-07-28 (`rounds`), what such a server tells
//! of its changes (`listen`), and the lists it is asked for (`tools_list`, `offers_list`,
//! `pages`).

pub(crate) mod changes;
pub(crate) mod classify;
pub(crate) mod client_handler;
pub(crate) mod connect;
pub(crate) mod followed_task;
pub(crate) mod icons;
pub(crate) mod interactions;
pub(crate) mod link;
pub(crate) mod listen;
pub(crate) mod offers_list;
pub(crate) mod pages;
pub(crate) mod requests;
pub(crate) mod rounds;
pub(crate) mod running;
pub(crate) mod tools_list;
