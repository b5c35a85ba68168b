//! Tests of config validation errors: each input gives exactly the listed (path, reason) pairs.

use super::{ConfigError, ConfigErrors, errors};

/// Asserts the errors of `text` are exactly `want`, as (path, part of the reason).
pub(super) fn assert_errors(text: &str, want: &[(&str, &str)]) {
    let got = errors(text);
    let shown: Vec<String> = got.iter().map(ToString::to_string).collect();
    assert_eq!(
        got.len(),
        want.len(),
        "input:\n{text}\ngot:\n{}",
        shown.join("\n")
    );
    for (error, (path, reason)) in got.iter().zip(want) {
        assert_eq!(
            error.path,
            *path,
            "input:\n{text}\ngot:\n{}",
            shown.join("\n")
        );
        assert!(
            error.reason.contains(reason),
            "{error:?} should contain {reason:?}"
        );
    }
}

#[test]
fn unknown_keys_are_named_with_suggestions() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "servers: [{name: a, comand: x}]",
            &[
                (
                    "servers[0] (a).comand",
                    "unknown field; did you mean \"command\"?",
                ),
                ("servers[0] (a)", "missing \"command\" (stdio) or \"url\""),
            ],
        ),
        (
            "servers: [{name: a, command: x, timout: 5s}]",
            &[("servers[0] (a).timout", "did you mean \"timeout\"?")],
        ),
        (
            "servers: [{name: a, command: x, zzz: 1}]",
            &[(
                "servers[0] (a).zzz",
                "unknown field; expected one of: name, transport, command, args",
            )],
        ),
        (
            "servers: [{name: a, command: x, type: stdio}]",
            &[("servers[0] (a).type", "did you mean \"transport\"?")],
        ),
        (
            "mcpServers: {a: {name: a, command: x}}",
            &[("mcpServers.a.name", "the key is the server's name")],
        ),
        (
            "mcp_servers: {}",
            &[("mcp_servers", "did you mean \"mcpServers\"?")],
        ),
        (
            "Listen: '0.0.0.0:1'",
            &[("Listen", "did you mean \"listen\"?")],
        ),
        (
            "inputs: []",
            &[(
                "inputs",
                "expected one of: listen, metrics_listen, mcp_listen, mcp_allowed_origins, mcp_sessions_per_caller, mcp_max_sessions, unix_listen, readiness, shutdown_grace, max_connection_age, max_connection_age_grace, record_arguments, auth, tls, reflection, limits, audit, tasks, state, views, servers, mcpServers",
            )],
        ),
        (
            "mcpServers: {a: {command: x, Env: {}}}",
            &[("mcpServers.a.Env", "did you mean \"env\"?")],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}

#[test]
fn server_identity_errors() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "servers: [{command: x}]",
            &[("servers[0]", "missing field \"name\"")],
        ),
        (
            "servers: [{name: ~, command: x}]",
            &[("servers[0]", "missing field \"name\"")],
        ),
        (
            "servers: [{name: 'my server', command: x}]",
            &[(
                "servers[0] (my server).name",
                "invalid server name: \"my server\" contains ' '",
            )],
        ),
        (
            "servers: [{name: '', command: x}]",
            &[("servers[0].name", "invalid server name: must not be empty")],
        ),
        (
            "mcpServers: {'a.b': {command: x}}",
            &[("mcpServers.a.b", "\"a.b\" contains '.'")],
        ),
        (
            "servers: [{name: a, command: x}, {name: b, command: y}, {name: a, url: 'http://h'}]",
            &[(
                "servers[2] (a).name",
                "duplicate server name \"a\"; first defined at servers[0] (a)",
            )],
        ),
        (
            "servers: [{name: a, command: x}]\nmcpServers: {a: {command: y}}",
            &[(
                "mcpServers.a",
                "duplicate server name \"a\"; first defined at servers[0] (a)",
            )],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}

#[test]
fn transport_errors() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "servers: [{name: a, command: x, url: 'http://h'}]",
            &[("servers[0] (a)", "not both")],
        ),
        (
            "servers: [{name: a}]",
            &[("servers[0] (a)", "missing \"command\" (stdio) or \"url\"")],
        ),
        (
            "servers: [{name: a, transport: stdio, url: 'http://h'}]",
            &[(
                "servers[0] (a).transport",
                "transport \"stdio\" needs \"command\", but this server has \"url\"",
            )],
        ),
        (
            "servers: [{name: a, transport: sse, command: x}]",
            &[(
                "servers[0] (a).transport",
                "transport \"sse\" needs \"url\"",
            )],
        ),
        (
            "mcpServers: {a: {type: http, command: x}}",
            &[("mcpServers.a.type", "transport \"http\" needs \"url\"")],
        ),
        (
            "servers: [{name: a, transport: stdoi, command: x}]",
            &[(
                "servers[0] (a).transport",
                "unknown transport \"stdoi\"; did you mean \"stdio\"?",
            )],
        ),
        (
            "servers: [{name: a, transport: websocket, url: 'http://h'}]",
            &[(
                "servers[0] (a).transport",
                "expected one of: stdio, sse, streamable-http, http",
            )],
        ),
        (
            "mcpServers: {a: {type: stdio, transport: stdio, command: x}}",
            &[("mcpServers.a.type", "give only one")],
        ),
        (
            "servers: [{name: a, command: x, headers: {A: b}}]",
            &[(
                "servers[0] (a).headers",
                "only for sse and streamable-http servers",
            )],
        ),
        (
            "servers: [{name: a, url: 'http://h', args: [x], env: {A: b}, cwd: /}]",
            &[
                ("servers[0] (a).args", "only for stdio servers"),
                ("servers[0] (a).env", "only for stdio servers"),
                ("servers[0] (a).cwd", "only for stdio servers"),
            ],
        ),
        (
            "servers: [{name: a, url: 'ftp://h'}]",
            &[(
                "servers[0] (a).url",
                "invalid url \"ftp://h\"; it must start with http://",
            )],
        ),
        (
            "servers: [{name: a, url: 'https://'}]",
            &[("servers[0] (a).url", "has no host")],
        ),
        (
            "servers: [{name: a, command: ''}]",
            &[("servers[0] (a).command", "must not be empty")],
        ),
        (
            "servers: [{name: a, command: x, cwd: '${EMPTY}'}]",
            &[(
                "servers[0] (a).cwd",
                "\"${EMPTY}\" expands to an empty value",
            )],
        ),
        (
            "servers: [{name: a, url: 'http://h', headers: {'Bad Name': x, Ok: '${MULTILINE}', ok: y}}]",
            &[
                (
                    "servers[0] (a).headers.Bad Name",
                    "invalid header name \"Bad Name\"",
                ),
                ("servers[0] (a).headers.Ok", "control character"),
                ("servers[0] (a).headers.ok", "header \"ok\" is given twice"),
            ],
        ),
        (
            "servers: [{name: a, url: 'http://h', headers: {Mcp-Session-Id: x, Accept: y}}]",
            &[
                (
                    "servers[0] (a).headers.Mcp-Session-Id",
                    "set by the MCP transport itself",
                ),
                (
                    "servers[0] (a).headers.Accept",
                    "set by the MCP transport itself",
                ),
            ],
        ),
        (
            "servers: [{name: a, command: x, env: {'A=B': x}}]",
            &[(
                "servers[0] (a).env.A=B",
                "invalid environment variable name",
            )],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}

#[test]
fn security_errors() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "auth: {tokens: [{value_env: NOT_SET}]}",
            &[("auth.tokens[0].value_env", "NOT_SET is not set")],
        ),
        (
            "auth: {tokens: [{name: x}, {value_env: TOKEN, value_file: /f}]}",
            &[
                ("auth.tokens[0]", "exactly one of"),
                ("auth.tokens[1]", "exactly one of"),
            ],
        ),
        (
            "auth: {tokens: [{valu_env: TOKEN}]}",
            &[
                ("auth.tokens[0].valu_env", "did you mean \"value_env\""),
                ("auth.tokens[0]", "exactly one of"),
            ],
        ),
        (
            "auth: {client_ca: /ca.pem}",
            &[("auth.client_ca", "need TLS")],
        ),
        (
            "tls: {cert: /c.pem}",
            &[("tls", "both \"cert\" and \"key\"")],
        ),
        (
            "limits: {max_request_bytes: lots}",
            &[("limits.max_request_bytes", "invalid size")],
        ),
        (
            "limits: {max_result_bytes: 0}",
            &[("limits.max_result_bytes", "greater than zero")],
        ),
        (
            "servers: [{name: a, command: x, max_concurrent_calls: 0}]",
            &[(
                "servers[0] (a).max_concurrent_calls",
                "between 1 and 100000, not 0",
            )],
        ),
        (
            "servers: [{name: a, url: 'http://h', inherit_env: true}]",
            &[("servers[0] (a).inherit_env", "only for stdio servers")],
        ),
        // Counts too large to be limits (once a panic inside tokio's semaphore).
        (
            "servers: [{name: a, command: x, max_concurrent_calls: 18446744073709551615}]",
            &[(
                "servers[0] (a).max_concurrent_calls",
                "must be between 1 and 100000, not 18446744073709551615",
            )],
        ),
        (
            "servers: [{name: a, command: x, max_queued_calls: 1000001}]",
            &[(
                "servers[0] (a).max_queued_calls",
                "must be between 0 and 1000000, not 1000001",
            )],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}

#[test]
fn replicas_are_1_to_64_and_only_for_stdio_servers() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "servers: [{name: a, url: 'http://h', replicas: 2}]",
            &[("servers[0] (a).replicas", "only for stdio servers")],
        ),
        (
            "servers: [{name: a, command: x, replicas: 0}]",
            &[("servers[0] (a).replicas", "between 1 and 64, not 0")],
        ),
        (
            "mcpServers: {a: {command: x, replicas: 65}}",
            &[("mcpServers.a.replicas", "between 1 and 64, not 65")],
        ),
        (
            "servers: [{name: a, command: x, replicas: -1}]",
            &[("servers[0] (a).replicas", "")],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}

#[test]
fn value_errors() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "servers: [{name: a, command: x, backoff_initial: 10s, backoff_max: 1s}]",
            &[("servers[0] (a).backoff_max", "shorter than backoff_initial")],
        ),
        (
            "shutdown_grace: soon",
            &[("shutdown_grace", "invalid duration")],
        ),
        (
            "max_connection_age: soon",
            &[("max_connection_age", "invalid duration")],
        ),
        (
            "max_connection_age: 0s",
            &[("max_connection_age", "greater than zero")],
        ),
        (
            "max_connection_age_grace: 10s",
            &[(
                "max_connection_age_grace",
                "only applies with max_connection_age",
            )],
        ),
        (
            "mcpServers: {a: {command: x, timeout: thirty}}",
            &[("mcpServers.a.timeout", "invalid duration \"thirty\"")],
        ),
        (
            "mcpServers: {a: {command: x, timeout: 0}}",
            &[("mcpServers.a.timeout", "greater than zero")],
        ),
        (
            "mcpServers: {a: {command: x, timeout: 0s}}",
            &[("mcpServers.a.timeout", "greater than zero")],
        ),
        (
            "mcpServers: {a: {command: x, init_timeout: -5}}",
            &[("mcpServers.a.init_timeout", "invalid duration -5")],
        ),
        (
            "mcpServers: {a: {command: x, timeout: 1.5}}",
            &[("mcpServers.a.timeout", "invalid duration 1.5")],
        ),
        (
            "mcpServers: {a: {command: x, timeout: [1]}}",
            &[("mcpServers.a.timeout", "found a list")],
        ),
        (
            "mcpServers: {a: {command: x, prefix: 'ev.'}}",
            &[(
                "mcpServers.a.prefix",
                "prefix \"ev.\" contains '.'; use only letters",
            )],
        ),
        (
            "mcpServers: {a: {command: x, prefix: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'}}",
            &[("mcpServers.a.prefix", "is 33 characters long; at most 32")],
        ),
        (
            "mcpServers: {a: {command: x, tools: [echo, '', echo]}}",
            &[
                ("mcpServers.a.tools[1]", "tool name must not be empty"),
                (
                    "mcpServers.a.tools[2]",
                    "tool \"echo\" is listed twice (first at mcpServers.a.tools[0])",
                ),
            ],
        ),
        (
            "listen: 'localhost:50051'",
            &[("listen", "invalid socket address \"localhost:50051\"")],
        ),
        (
            "metrics_listen: '0.0.0.0'",
            &[("metrics_listen", "invalid socket address \"0.0.0.0\"")],
        ),
        (
            "mcp_listen: 'localhost:8080'",
            &[("mcp_listen", "invalid socket address \"localhost:8080\"")],
        ),
        (
            "listen: 'unix:/tmp/broker.sock'",
            &[(
                "listen",
                "is a Unix socket; `listen` takes an IP address and a port: put the socket in `unix_listen`",
            )],
        ),
        ("unix_listen: 'unix:'", &[("unix_listen", "is empty")]),
        (
            "unix_listen: /run/toolbroker/",
            &[("unix_listen", "\"/run/toolbroker/\" names a directory")],
        ),
        (
            "unix_listen: /dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd/x.sock",
            &[(
                "unix_listen",
                "is 108 bytes long; a Unix socket's path may have at most 107",
            )],
        ),
        (
            "readiness: al",
            &[(
                "readiness",
                "unknown readiness \"al\"; did you mean \"all\"?",
            )],
        ),
        (
            "readiness: never",
            &[("readiness", "expected one of: first-attempt, all")],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}

#[test]
fn unset_variables_are_named_with_their_path() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "servers: [{name: needs-var, command: x, env: {API_KEY: '${MISSING_KEY}'}}]",
            &[(
                "servers[0] (needs-var).env.API_KEY",
                "environment variable MISSING_KEY is not set",
            )],
        ),
        (
            "servers: [{name: a, command: x}, {name: b, command: y, env: {API_KEY: '${NOPE}'}}]",
            &[(
                "servers[1] (b).env.API_KEY",
                "environment variable NOPE is not set (write ${NOPE:-default} to give a default)",
            )],
        ),
        (
            "mcpServers: {m: {command: x, args: [a, '${A}-${B}']}}",
            &[
                ("mcpServers.m.args[1]", "environment variable A is not set"),
                ("mcpServers.m.args[1]", "environment variable B is not set"),
            ],
        ),
        (
            "servers: [{name: a, url: 'http://${HOST}/mcp', headers: {Authorization: 'Bearer ${TOKEN2}'}}]",
            &[
                ("servers[0] (a).url", "environment variable HOST is not set"),
                (
                    "servers[0] (a).headers.Authorization",
                    "environment variable TOKEN2 is not set",
                ),
            ],
        ),
        (
            "servers: [{name: a, command: '${CMD}', cwd: '${DIR}'}]",
            &[
                ("servers[0] (a).command", "CMD is not set"),
                ("servers[0] (a).cwd", "DIR is not set"),
            ],
        ),
        (
            "servers: [{name: a, command: 'x${A'}]",
            &[("servers[0] (a).command", "unterminated \"${\" at byte 1")],
        ),
        (
            "servers: [{name: a, command: '${1X}'}]",
            &[(
                "servers[0] (a).command",
                "invalid variable reference \"${1X}\"",
            )],
        ),
        (
            "servers: [{name: a, command: '${}'}]",
            &[("servers[0] (a).command", "empty variable name")],
        ),
        (
            "listen: '${ADDR}'",
            &[("listen", "environment variable ADDR is not set")],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}

#[test]
fn type_errors_name_their_path() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "servers: [{name: a, command: x, args: 5}]",
            &[(
                "servers[0] (a).args",
                "invalid type: integer `5`, expected a sequence",
            )],
        ),
        (
            "servers: [{name: a, command: x, args: [a, 1.5]}]",
            &[("servers[0] (a).args[1]", "floating point `1.5`")],
        ),
        (
            "servers: [{name: a, command: x, env: [a]}]",
            &[("servers[0] (a).env", "expected a map of names to values")],
        ),
        (
            "servers: [{name: a, command: x, env: {A: {b: c}}}]",
            &[("servers[0] (a).env.A", "invalid type: map")],
        ),
        (
            "servers: [{name: a, command: x, tools: echo}]",
            &[("servers[0] (a).tools", "expected a sequence")],
        ),
        (
            "servers: [{name: 5, command: x}]",
            &[("servers[0].name", "expected a string")],
        ),
        (
            "servers: [{name: a, command: [x]}]",
            &[("servers[0] (a).command", "expected a string")],
        ),
        (
            "servers: [{name: a, url: {}}]",
            &[("servers[0] (a).url", "expected a string")],
        ),
        (
            "servers: 5",
            &[("servers", "expected a list of servers, found a number")],
        ),
        (
            "servers: [everything]",
            &[(
                "servers[0]",
                "expected a mapping of server fields, found a string",
            )],
        ),
        ("mcpServers: [a]", &[("mcpServers", "expected a map")]),
        (
            "mcpServers: {a: null}",
            &[(
                "mcpServers.a",
                "expected a mapping of server fields, found nothing",
            )],
        ),
        (
            "- a\n- b",
            &[("", "expected a mapping of settings, found a list")],
        ),
        ("listen: 50051", &[("listen", "expected a string")]),
        (
            "a: !custom x",
            &[("a", "yaml tag !custom is not supported")],
        ),
        ("[1]: x", &[("", "mapping keys must be strings")]),
        (
            "servers: [{name: a, command: x, args: 5, env: 6, tools: 7}]",
            &[
                ("servers[0] (a).args", "expected a sequence"),
                ("servers[0] (a).env", "expected a map"),
                ("servers[0] (a).tools", "expected a sequence"),
            ],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}

#[test]
fn yaml_syntax_errors_give_line_and_column() {
    let cases: &[(&str, &str)] = &[
        ("servers:\n  - name: a\n   command: x\n", "line 3 column"),
        ("servers: [\n", "line 2 column 1"),
        ("listen: 'x\n", "line 2"),
        (
            "servers: []\nservers: []\n",
            "duplicate entry with key \"servers\"",
        ),
        (
            "mcpServers:\n  a: {command: x}\n  a: {command: y}\n",
            "duplicate entry with key \"a\"",
        ),
        ("a: 1\n---\nb: 2\n", "more than one document"),
    ];
    for (text, want) in cases {
        let got = errors(text);
        assert_eq!(got.len(), 1, "{text:?}: {got:?}");
        assert_eq!(got[0].path, "");
        assert!(got[0].reason.starts_with("invalid yaml: "), "{:?}", got[0]);
        assert!(
            got[0].reason.contains(want),
            "{:?} should contain {want:?}",
            got[0]
        );
    }
}

#[test]
fn every_mistake_is_reported() {
    let text = r#"
listen: "nowhere"
readiness: sometimes
servers:
  - name: ok
    command: npx
  - name: "bad name"
    comand: npx
    timeout: 0
  - name: ok
    url: "http://h"
    transport: stdio
    prefix: "a b"
mcpServers:
  remote: { url: "http://h", headers: { Authorization: "Bearer ${SECRET_TOKEN}" }, args: 5 }
"#;
    let got: Vec<String> = errors(text).iter().map(ToString::to_string).collect();
    let want = [
        "listen: invalid socket address \"nowhere\"; expected an IP address and a port, like 0.0.0.0:50051",
        "readiness: unknown readiness \"sometimes\"; expected one of: first-attempt, all",
        "servers[1] (bad name).comand: unknown field; did you mean \"command\"?",
        "servers[1] (bad name).name: invalid server name: \"bad name\" contains ' '; use only letters, digits, '_' and '-'",
        "servers[1] (bad name): missing \"command\" (stdio) or \"url\" (sse, streamable-http)",
        "servers[1] (bad name).timeout: duration must be greater than zero",
        "servers[2] (ok).name: duplicate server name \"ok\"; first defined at servers[0] (ok)",
        "servers[2] (ok).transport: transport \"stdio\" needs \"command\", but this server has \"url\"",
        "servers[2] (ok).prefix: prefix \"a b\" contains ' '; use only letters, digits, '_' and '-'",
        "mcpServers.remote.args: invalid type: integer `5`, expected a sequence",
        "mcpServers.remote.headers.Authorization: environment variable SECRET_TOKEN is not set (write ${SECRET_TOKEN:-default} to give a default)",
    ];
    assert_eq!(got, want);
}

#[test]
fn errors_display_one_per_line() {
    let errors = ConfigErrors(vec![
        ConfigError::new("servers[2].timeout", "duration must be greater than zero"),
        ConfigError::new("", "invalid yaml: x"),
    ]);
    assert_eq!(
        errors.to_string(),
        "servers[2].timeout: duration must be greater than zero\ninvalid yaml: x"
    );
}

#[test]
fn max_timeout_and_roots_are_checked() {
    assert_errors(
        "servers: [{name: a, command: x, timeout: 10s, max_timeout: 5s}]",
        &[("servers[0] (a).max_timeout", "shorter than timeout (10s)")],
    );
    assert_errors(
        "servers: [{name: a, command: x, roots: [\"http://x/y\", \"not a uri\"]}]",
        &[
            ("servers[0] (a).roots[0]", "a root is a file:// URI"),
            ("servers[0] (a).roots[1]", "not a URI"),
        ],
    );
}
