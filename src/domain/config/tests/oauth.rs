//! `oauth` of an HTTP server: which grant its fields make, and every mistake named at its field.

use std::path::PathBuf;

use super::{errors::assert_errors, parse_with_env};
use crate::domain::config::{ClientAuth, Grant, SigningAlgorithm};

fn grant_of(oauth: &str) -> (Grant, Vec<String>) {
    let text = format!("servers:\n  - name: remote\n    url: https://mcp.example.com/mcp\n{oauth}");
    let config = parse_with_env(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
    let oauth = config.servers[0].oauth.clone().expect("an oauth section");
    (oauth.grant, oauth.scopes)
}

#[test]
fn a_client_id_with_a_secret_is_the_client_credentials_grant() {
    let (grant, scopes) = grant_of(
        "    oauth: { client_id: toolbroker, client_secret_env: API_KEY, scopes: [read, write] }\n",
    );
    let Grant::ClientCredentials(client) = grant else {
        panic!("{grant:?}")
    };
    assert_eq!(client.id, "toolbroker");
    let ClientAuth::Secret(secret) = client.auth else {
        panic!("a secret")
    };
    assert_eq!(secret.expose(), "key-123-secret");
    assert_eq!(scopes, ["read", "write"]);
}

#[test]
fn a_key_file_signs_assertions_with_the_algorithm_given_or_its_own() {
    let (grant, _) = grant_of(
        "    oauth: { client_id: tb, private_key_file: \"${HOME}/tb.pem\", signing_algorithm: es256 }\n",
    );
    let Grant::ClientCredentials(client) = grant else {
        panic!("{grant:?}")
    };
    let ClientAuth::PrivateKey(key) = client.auth else {
        panic!("a key")
    };
    assert_eq!(key.file, PathBuf::from("/home/me/tb.pem"));
    assert_eq!(key.algorithm, Some(SigningAlgorithm::ES256));
    assert_eq!(key.at, "servers[0] (remote).oauth.private_key_file");
}

#[test]
fn a_token_store_is_a_login_with_whatever_client_it_names() {
    let (grant, scopes) = grant_of("    oauth: { token_store: /var/lib/tb/remote.json }\n");
    let Grant::Login(login) = grant else {
        panic!("{grant:?}")
    };
    assert_eq!(login.token_store, PathBuf::from("/var/lib/tb/remote.json"));
    assert_eq!(login.client_id, None);
    assert!(scopes.is_empty(), "no scopes unless given: {scopes:?}");
    let (grant, _) = grant_of(
        r#"    oauth:
      token_store: t.json
      client_id: pre
      client_secret_env: TOKEN
      client_metadata_url: https://tb.example.com/client.json
      redirect_uri: http://127.0.0.1:8976/callback
"#,
    );
    let Grant::Login(login) = grant else {
        panic!("{grant:?}")
    };
    assert_eq!(login.client_id.as_deref(), Some("pre"));
    assert_eq!(login.client_secret.unwrap().expose(), "tok-456-secret");
    assert_eq!(
        login.client_metadata_url.as_deref(),
        Some("https://tb.example.com/client.json")
    );
    assert_eq!(
        login.redirect_uri.as_deref(),
        Some("http://127.0.0.1:8976/callback")
    );
}

#[test]
fn cross_app_access_is_per_caller() {
    let (grant, _) = grant_of(
        r#"    isolation: per-caller
    oauth:
      client_id: tb
      client_secret_env: API_KEY
      cross_app_access:
        idp_token_endpoint: https://idp.example.com/token
        idp_client_id: tb-idp
        idp_client_secret_env: TOKEN
"#,
    );
    let Grant::CrossApp(cross) = grant else {
        panic!("{grant:?}")
    };
    assert_eq!(cross.client_id, "tb");
    assert_eq!(cross.idp_token_endpoint, "https://idp.example.com/token");
    assert_eq!(cross.idp_client_id, "tb-idp");
    assert_eq!(cross.idp_client_secret.unwrap().expose(), "tok-456-secret");
    assert_eq!(cross.idp_issuer, None);
}

#[test]
fn oauth_mistakes_are_named_at_their_field() {
    let at = "servers[0] (remote).oauth";
    let cases: Vec<(String, Vec<(String, &str)>)> = vec![
        (
            "    oauth: {}\n".into(),
            vec![(at.into(), "says nothing of where tokens come from")],
        ),
        (
            "    oauth: { client_secret_env: API_KEY }\n".into(),
            vec![(format!("{at}.client_id"), "missing")],
        ),
        (
            "    oauth: { client_id: a, client_secret_env: API_KEY, private_key_file: k.pem }\n"
                .into(),
            vec![(format!("{at}.private_key_file"), "not both")],
        ),
        (
            "    oauth: { client_id: a, client_secret_env: NOPE }\n".into(),
            vec![(format!("{at}.client_secret_env"), "NOPE is not set")],
        ),
        (
            "    oauth: { client_id: a, client_secret_env: API_KEY, signing_algorithm: ES256 }\n"
                .into(),
            vec![(format!("{at}.signing_algorithm"), "only with private_key_file")],
        ),
        (
            "    oauth: { client_id: a, private_key_file: k.pem, signing_algorithm: HS256 }\n"
                .into(),
            vec![(format!("{at}.signing_algorithm"), "unknown signing algorithm")],
        ),
        (
            "    oauth: { token_store: t.json, scopes: [\"read write\", ok, ok] }\n".into(),
            vec![
                (format!("{at}.scopes[0]"), "invalid scope"),
                (format!("{at}.scopes[2]"), "listed twice"),
            ],
        ),
        (
            "    oauth: { token_store: t.json, redirect_uri: \"https://example.com/cb\" }\n".into(),
            vec![(format!("{at}.redirect_uri"), "must be http:// on 127.0.0.1")],
        ),
        (
            "    oauth: { token_store: t.json, client_metadata_url: \"http://x.example/c.json\" }\n"
                .into(),
            vec![(format!("{at}.client_metadata_url"), "https:// URL with a path")],
        ),
        (
            "    oauth: { client_id: a, client_secret_env: API_KEY, redirect_uri: \"http://127.0.0.1:1/c\" }\n"
                .into(),
            vec![(format!("{at}.redirect_uri"), "only with token_store")],
        ),
        (
            "    oauth: { token_store: t.json, client_secret_env: API_KEY }\n".into(),
            vec![(format!("{at}.client_secret_env"), "needs client_id")],
        ),
        (
            "    oauth: { token_store: t.json, tokens: x }\n".into(),
            vec![(format!("{at}.tokens"), "unknown field")],
        ),
        (
            "    oauth: { client_id: a, client_secret_env: API_KEY, cross_app_access: { idp_client_id: i } }\n"
                .into(),
            vec![
                (
                    format!("{at}.cross_app_access"),
                    "needs \"isolation: per-caller\"",
                ),
                (
                    format!("{at}.cross_app_access.idp_token_endpoint"),
                    "missing",
                ),
            ],
        ),
        (
            "    isolation: per-caller\n    oauth: { client_id: a, client_secret_env: NOPE, cross_app_access: { idp_token_endpoint: \"https://idp.example/token\", idp_client_id: i } }\n"
                .into(),
            // An unset variable is reported once, where it is named.
            vec![(format!("{at}.client_secret_env"), "NOPE is not set")],
        ),
        (
            "    headers: { Authorization: \"Bearer x\" }\n    oauth: { token_store: t.json }\n"
                .into(),
            vec![(at.into(), "not with an Authorization header")],
        ),
        (
            "    transport: sse\n    oauth: { token_store: t.json }\n".into(),
            vec![(at.into(), "not with \"transport: sse\"")],
        ),
    ];
    for (oauth, want) in &cases {
        let text =
            format!("servers:\n  - name: remote\n    url: https://mcp.example.com/mcp\n{oauth}");
        let want: Vec<(&str, &str)> = want.iter().map(|(p, r)| (p.as_str(), *r)).collect();
        assert_errors(&text, &want);
    }
}

#[test]
fn oauth_is_for_http_servers_only() {
    assert_errors(
        "servers:\n  - name: local\n    command: demo\n    oauth: { token_store: t.json }\n",
        &[("servers[0] (local).oauth", "only for HTTP servers")],
    );
}
