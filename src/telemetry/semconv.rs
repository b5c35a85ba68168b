//! Names from the OpenTelemetry semantic conventions, in one place.
//!
//! Spans: RPC spans (https://opentelemetry.io/docs/specs/semconv/rpc/rpc-spans/, gRPC:
//! https://opentelemetry.io/docs/specs/semconv/rpc/grpc/), MCP spans and metrics
//! (https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/), GenAI tool execution attributes
//! (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/#execute-tool-span).
//! `tracing` needs span field names as literals, so the span macros spell the same names; the
//! metrics use these constants. Prometheus names are the OpenTelemetry names with `.` → `_`
//! and the unit as a suffix, as the OpenTelemetry-to-Prometheus mapping does.

/// `mcp.client.operation.duration` (histogram, seconds).
pub const MCP_CLIENT_OPERATION_DURATION: &str = "mcp_client_operation_duration_seconds";
/// `mcp.server.operation.duration` (histogram, seconds): the MCP face's requests.
pub const MCP_SERVER_OPERATION_DURATION: &str = "mcp_server_operation_duration_seconds";
/// `rpc.server.call.duration` (histogram, seconds).
pub const RPC_SERVER_CALL_DURATION: &str = "rpc_server_call_duration_seconds";

/// `mcp.method.name`, e.g. `tools/call`.
pub const MCP_METHOD_NAME: &str = "mcp_method_name";
/// `gen_ai.tool.name`: the tool's name on its server.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai_tool_name";
/// `error.type`: `tool_error` when the tool reported an error, else the failure's class.
pub const ERROR_TYPE: &str = "error_type";
/// `rpc.method` (gRPC method name).
pub const RPC_METHOD: &str = "rpc_method";
/// `rpc.grpc.status_code` (the status name, for readability).
pub const RPC_GRPC_STATUS_CODE: &str = "rpc_grpc_status_code";
/// Our own: the configured server name.
pub const SERVER: &str = "toolbroker_server";
