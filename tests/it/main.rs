//! The integration tests, in one test binary: one module per area (run one area with
//! `cargo test --test it mcp_face::`). One binary links the crate once, where a binary per file
//! linked it once each. Every test is parallel-safe with every other in this process: each
//! starts its own broker and servers on ports it holds or that they bound themselves, in its own
//! temp dir, and waits on events or polled conditions, not on the clock.

mod audit_support;
mod common;

mod audit_and_rates;
mod audit_commit;
mod audit_refusals;
// Its counting allocator is the whole binary's global allocator (it counts per thread).
mod blob_copies;
mod call_tool;
mod caller_identity;
mod callers;
mod catalog_shaping;
mod cli;
mod connection_age;
mod connections;
mod face_tasks;
mod faces_agree;
mod health_reflection;
mod http_upstreams;
mod isolation_faces;
mod isolation_servers;
mod layering;
mod limits;
mod list_tools;
mod long_calls;
mod mcp_face;
mod mcp_face_bounds;
mod mcp_stdio;
mod metrics;
mod oauth_fixtures;
mod per_caller;
mod protocol_2026;
mod readme_recipes;
mod reload;
mod replicas;
mod resources_prompts;
mod security;
mod server_failures;
mod shared_state;
mod shared_tokens;
mod socket_hostile_frames;
mod stalled_stdin;
mod streaming;
mod supervision;
mod telemetry;
mod titles_icons;
mod token_exchange;
mod unix_socket;
mod upstream_2026;
mod upstream_isolation;
mod upstream_oauth;
mod upstream_tasks;
mod watch;
