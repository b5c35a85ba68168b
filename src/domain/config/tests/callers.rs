//! Callers in the config: `auth.jwt`, per-caller servers (`isolation`, `max_sessions`,
//! `max_sessions_per_caller`, `idle_timeout`, `discovery`), caller values and `token_exchange`.

use std::time::Duration;

use super::{errors::assert_errors, parse_with_env};
use crate::domain::{
    caller::{CallerKind, CallerRef, Template},
    config::{Isolation, JwksSource, TransportSpec},
};

#[test]
fn a_per_caller_server_keeps_caller_values_for_each_call() {
    let config = parse_with_env(
        r#"
servers:
  - name: memory
    command: npx
    args: ["-y", "server-memory", "--user", "${caller.id}"]
    env: { MEMORY_FILE_PATH: "${HOME}/${caller.id}.json", KEY: "${API_KEY}" }
    cwd: "/srv/${caller.claim.org}"
    isolation: per-caller
    max_sessions: 5
    max_sessions_per_caller: 3
    idle_timeout: 30s
    discovery: { id: lister, headers: { X-Tenant: t0 } }
"#,
    )
    .unwrap();
    let server = &config.servers[0];
    let Isolation::PerCaller(per_caller) = &server.isolation else {
        panic!("per-caller: {:?}", server.isolation)
    };
    assert_eq!(per_caller.max_sessions, 5);
    assert_eq!(per_caller.max_sessions_per_caller, 3);
    assert_eq!(per_caller.idle_timeout, Duration::from_secs(30));
    assert_eq!(per_caller.discovery.key.id, "lister");
    assert_eq!(
        per_caller.discovery.headers,
        [("x-tenant".into(), "t0".into())]
    );
    let TransportSpec::Stdio(stdio) = &server.transport else {
        panic!("stdio")
    };
    let refs = |t: &Template| t.caller_refs().cloned().collect::<Vec<_>>();
    assert_eq!(refs(&stdio.args[3]), [CallerRef::Id]);
    assert_eq!(
        stdio.env["MEMORY_FILE_PATH"].as_written(),
        "/home/me/${caller.id}.json",
        "the environment is expanded now, the caller later"
    );
    assert!(stdio.env["KEY"].is_fixed());
    assert_eq!(
        refs(stdio.cwd.as_ref().unwrap()),
        [CallerRef::Claim("org".into())]
    );
}

#[test]
fn caller_values_are_only_for_the_process_and_headers_of_per_caller_servers() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "servers: [{name: a, command: x, env: {K: '${caller.id}'}}]",
            &[(
                "servers[0] (a).env.K",
                "${caller.id} is a caller value: only the headers, env, args and cwd",
            )],
        ),
        (
            "servers: [{name: a, url: 'http://h/${caller.id}', isolation: per-caller}]",
            &[("servers[0] (a).url", "${caller.id} is a caller value")],
        ),
        (
            "servers: [{name: a, command: '${caller.id}', isolation: per-caller}]",
            &[("servers[0] (a).command", "is a caller value")],
        ),
        (
            "servers: [{name: a, command: x, isolation: per-caller, args: ['${caller.name}']}]",
            &[(
                "servers[0] (a).args[0]",
                "unknown caller value \"caller.name\"",
            )],
        ),
        (
            "servers: [{name: a, url: 'http://h', isolation: per-caller, headers: {X: '${caller.header.}'}}]",
            &[("servers[0] (a).headers.X", "unknown caller value")],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}

#[test]
fn a_callers_token_is_refused_in_args_and_kept_in_env_and_headers() {
    assert_errors(
        "servers: [{name: a, command: x, isolation: per-caller, \
         args: ['--verbose', '--token=${caller.token}']}]",
        &[(
            "servers[0] (a).args[1]",
            "${caller.token} may not be in args: a command line is readable by every local user",
        )],
    );
    let config = parse_with_env(
        "servers:\n\
         - {name: a, command: x, isolation: per-caller, env: {TOKEN: '${caller.token}'}}\n\
         - {name: b, url: 'http://h', isolation: per-caller, \
            headers: {Authorization: 'Bearer ${caller.token}'}}",
    )
    .unwrap();
    assert_eq!(config.servers.len(), 2);
}

#[test]
fn discovery_renders_its_id_against_the_first_kind_of_caller() {
    let config = parse_with_env(
        "auth: {tokens: [{name: t, value_env: TOKEN}]}\n\
         servers: [{name: a, command: x, isolation: per-caller}]",
    )
    .unwrap();
    let Isolation::PerCaller(per_caller) = &config.servers[0].isolation else {
        panic!("per-caller")
    };
    assert_eq!(per_caller.discovery.first_kind, CallerKind::Token);
}

#[test]
fn a_caller_has_two_sessions_of_a_server_at_most_unless_told() {
    let config = parse_with_env("servers: [{name: a, command: x, isolation: per-caller}]").unwrap();
    let Isolation::PerCaller(per_caller) = &config.servers[0].isolation else {
        panic!("per-caller")
    };
    assert_eq!(
        per_caller.max_sessions_per_caller,
        crate::domain::config::DEFAULT_MAX_SESSIONS_PER_CALLER
    );
    assert_eq!(per_caller.max_sessions_per_caller, 2);
}

#[test]
fn per_caller_fields_are_checked() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "servers: [{name: a, command: x, isolation: per-caler}]",
            &[("servers[0] (a).isolation", "did you mean \"per-caller\"?")],
        ),
        (
            "servers: [{name: a, command: x, max_sessions: 3, idle_timeout: 1m}]",
            &[
                (
                    "servers[0] (a).max_sessions",
                    "only for servers with \"isolation: per-caller\"",
                ),
                (
                    "servers[0] (a).idle_timeout",
                    "only for servers with \"isolation: per-caller\"",
                ),
            ],
        ),
        (
            "servers: [{name: a, command: x, isolation: per-caller, max_sessions: 0}]",
            &[(
                "servers[0] (a).max_sessions",
                "must be between 1 and 10000, not 0",
            )],
        ),
        (
            "servers: [{name: a, command: x, isolation: per-caller, max_sessions: 10001}]",
            &[(
                "servers[0] (a).max_sessions",
                "must be between 1 and 10000, not 10001",
            )],
        ),
        (
            "servers: [{name: a, command: x, max_sessions_per_caller: 1}]",
            &[(
                "servers[0] (a).max_sessions_per_caller",
                "only for servers with \"isolation: per-caller\"",
            )],
        ),
        (
            "servers: [{name: a, command: x, isolation: per-caller, max_sessions_per_caller: 0}]",
            &[(
                "servers[0] (a).max_sessions_per_caller",
                "must be between 1 and 10000, not 0",
            )],
        ),
        (
            "servers: [{name: a, command: x, isolation: per-caller, replicas: 2}]",
            &[("servers[0] (a).replicas", "only for shared servers")],
        ),
        (
            "servers: [{name: a, command: x, isolation: per-caller, discovery: {idd: x}}]",
            &[("servers[0] (a).discovery.idd", "did you mean \"id\"?")],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}

#[test]
fn token_exchange_is_for_per_caller_http_servers_with_every_field() {
    let exchange = "{token_url: 'https://idp/token', client_id: tb, client_secret_env: API_KEY}";
    let ok = parse_with_env(&format!(
        "servers: [{{name: a, url: 'http://h', isolation: per-caller, token_exchange: {exchange}}}]"
    ))
    .unwrap();
    let spec = ok.servers[0].token_exchange.as_ref().unwrap();
    assert_eq!(
        (spec.client_id.as_str(), spec.client_secret.expose()),
        ("tb", "key-123-secret")
    );
    let cases: Vec<(String, Vec<(&str, &str)>)> = vec![
        (
            format!("servers: [{{name: a, command: x, isolation: per-caller, token_exchange: {exchange}}}]"),
            vec![("servers[0] (a).token_exchange", "only for HTTP servers")],
        ),
        (
            format!("servers: [{{name: a, url: 'http://h', token_exchange: {exchange}}}]"),
            vec![("servers[0] (a).token_exchange", "isolation: per-caller")],
        ),
        (
            "servers: [{name: a, url: 'http://h', isolation: per-caller, token_exchange: {client_id: tb, client_secret_env: NOPE}}]".into(),
            vec![
                ("servers[0] (a).token_exchange.token_url", "missing"),
                ("servers[0] (a).token_exchange.client_secret_env", "NOPE is not set"),
            ],
        ),
    ];
    for (text, want) in &cases {
        assert_errors(text, want);
    }
}

#[test]
fn jwt_settings_are_checked() {
    let ok = parse_with_env(
        "auth: {jwt: {issuer: 'https://idp', audience: tb, jwks_url: 'https://idp/jwks', \
         grants_claim: scope, grants: {'tools:fs': ['fs_*']}}}",
    )
    .unwrap();
    let jwt = ok.auth.jwt.as_ref().unwrap();
    assert_eq!(jwt.keys, JwksSource::Url("https://idp/jwks".into()));
    assert_eq!(jwt.caller_claim, "sub");
    assert_eq!(
        jwt.grants.as_deref(),
        Some(&[("tools:fs".to_owned(), vec!["fs_*".to_owned()])][..])
    );
    assert!(ok.auth.enabled());
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "auth: {jwt: {audience: tb, jwks_file: /k.json}}",
            &[("auth.jwt.issuer", "missing")],
        ),
        (
            "auth: {jwt: {issuer: i, audience: tb, jwks_file: /k.json, jwks_url: 'http://k'}}",
            &[("auth.jwt", "exactly one of \"jwks_file\" or \"jwks_url\"")],
        ),
        (
            "auth: {jwt: {issuer: i, audience: tb, jwks_file: /k.json, grants: {a: [x]}}}",
            &[("auth.jwt", "\"grants\" and \"grants_claim\" go together")],
        ),
        (
            "auth: {jwt: {issuer: i, audience: tb, jwks_file: /k.json, grants_claim: scope, grants: {a: x}}}",
            &[("auth.jwt.grants.a", "expected a list of tool patterns")],
        ),
    ];
    for (text, want) in cases {
        assert_errors(text, want);
    }
}
