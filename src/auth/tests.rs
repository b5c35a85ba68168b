//! The gate against real credentials: static tokens, and JWTs signed with a freshly generated
//! RSA key whose JWKS is written to a file (plus the attacks a verifier must refuse).

use std::{
    sync::OnceLock,
    time::{SystemTime, UNIX_EPOCH},
};

use jsonwebtoken::{Algorithm, EncodingKey, Header, jwk::Jwk, jwk::JwkSet};
use rsa::{Generate, pkcs8::EncodePrivateKey};
use serde_json::{Value, json};

use super::*;
use crate::domain::{config::parse, request_error::JwtFailure, views::Views};

/// One RSA key per test run (generation takes a moment): its PEM and its public JWK.
fn key() -> &'static (String, Jwk) {
    static KEY: OnceLock<(String, Jwk)> = OnceLock::new();
    KEY.get_or_init(|| {
        let pem = rsa::PrivateKey::generate()
            .to_pkcs8_pem(Default::default())
            .unwrap()
            .to_string();
        let encoding = EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap();
        let mut jwk = Jwk::from_encoding_key(&encoding, Algorithm::RS256).unwrap();
        jwk.common.key_id = Some("k1".into());
        (pem, jwk)
    })
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims() -> Value {
    json!({
        "sub": "alice",
        "iss": "https://idp.test",
        "aud": ["toolbroker", "other"],
        "exp": now() + 300,
        "scope": "tools:fs openid",
    })
}

/// A JWT of `claims`, signed with the test key, `kid` in its header.
fn signed(claims: &Value, kid: Option<&str>) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = kid.map(str::to_owned);
    let key = EncodingKey::from_rsa_pem(key().0.as_bytes()).unwrap();
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

/// A token with any header and payload, and a signature of junk.
fn unsigned(header: Value, claims: &Value) -> String {
    use base64::Engine as _;
    let b64 = |v: &Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    };
    format!("{}.{}.c2lnbmF0dXJl", b64(&header), b64(claims))
}

/// A gate with a static token `s3cret` (agent, fs_* only) and JWTs from the test issuer.
fn gate(dir: &tempfile::TempDir) -> Gate {
    let jwks = dir.path().join("jwks.json");
    let set = JwkSet {
        keys: vec![key().1.clone()],
    };
    std::fs::write(&jwks, serde_json::to_string(&set).unwrap()).unwrap();
    let yaml = format!(
        "auth:\n  tokens: [{{name: agent, value_env: T, tools: ['fs_*'], prompts: ['fs_*'], \
         resources: [fs]}}]\n  jwt:\n    \
         issuer: https://idp.test\n    audience: toolbroker\n    jwks_file: {}\n    \
         grants_claim: scope\n    grants: {{'tools:fs': ['fs_*'], 'tools:all': ['*']}}\n",
        jwks.display()
    );
    let config = parse(&yaml, &|name| (name == "T").then(|| "s3cret".to_owned())).unwrap();
    Gate::new(Credentials::load(&config.auth, &Views::new(&config.views)).unwrap())
}

fn headers(authorization: Option<&str>) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    if let Some(value) = authorization {
        headers.insert("authorization", value.parse().unwrap());
    }
    headers
}

async fn admit(gate: &Gate, token: Option<&str>) -> Result<Caller, RequestError> {
    let header = token.map(|t| format!("Bearer {t}"));
    gate.admit(&headers(header.as_deref()), None).await
}

fn refused(failure: JwtFailure) -> Result<(), RequestError> {
    Err(RequestError::Unauthenticated(AuthFailure::Jwt(failure)))
}

#[tokio::test]
async fn static_tokens_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(&dir);
    let unauthenticated = RequestError::Unauthenticated;
    let missing = gate.admit(&headers(None), None).await.unwrap_err();
    assert_eq!(missing, unauthenticated(AuthFailure::MissingToken));
    let basic = gate.admit(&headers(Some("Basic s3cret")), None).await;
    assert_eq!(basic.unwrap_err(), unauthenticated(AuthFailure::NotBearer));
    let wrong = admit(&gate, Some("wrong")).await.unwrap_err();
    assert_eq!(wrong, unauthenticated(AuthFailure::InvalidToken));
    let agent = admit(&gate, Some("s3cret")).await.unwrap();
    assert_eq!(agent.key.id, "agent");
    assert_eq!(agent.key.kind, CallerKind::Token);
    assert!(agent.may_use("fs_read") && !agent.may_use("shell_exec"));
    assert!(agent.may_prompt("fs_review") && !agent.may_prompt("greet"));
    assert!(agent.may_read("fs") && !agent.may_read("memory"));
}

#[tokio::test]
async fn a_valid_jwt_names_its_caller_and_grants_its_tools() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(&dir);
    let token = signed(&claims(), Some("k1"));
    let alice = admit(&gate, Some(&token)).await.unwrap();
    assert_eq!(
        (alice.key.kind, alice.key.id.as_str()),
        (CallerKind::Jwt, "alice")
    );
    assert_eq!(alice.token(), Some(token.as_str()));
    assert_eq!(alice.claim("iss").as_deref(), Some("https://idp.test"));
    assert!(
        alice.may_use("fs_read") && !alice.may_use("echo"),
        "scope tools:fs"
    );
    // No kid: the JWKS's only key.
    assert!(admit(&gate, Some(&signed(&claims(), None))).await.is_ok());
}

#[tokio::test]
async fn every_bad_jwt_is_refused_saying_which_check_failed() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate(&dir);
    let with = |change: &dyn Fn(&mut Value)| {
        let mut claims = claims();
        change(&mut claims);
        claims
    };
    let public_pem = {
        use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey};
        let private = rsa::PrivateKey::from_pkcs8_pem(&key().0).unwrap();
        rsa::PublicKey::from(&private)
            .to_public_key_pem(Default::default())
            .unwrap()
    };
    let hmac_with_public_key = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims(),
        &EncodingKey::from_secret(public_pem.as_bytes()).unwrap(),
    )
    .unwrap();
    let forged = {
        let token = signed(&claims(), Some("k1"));
        let (rest, _) = token.rsplit_once('.').unwrap();
        format!("{rest}.{}", "A".repeat(342))
    };
    let cases = [
        (
            signed(&with(&|c| c["exp"] = json!(now() - 120)), Some("k1")),
            JwtFailure::Expired,
        ),
        (
            signed(&with(&|c| c["nbf"] = json!(now() + 600)), Some("k1")),
            JwtFailure::NotYetValid,
        ),
        (
            signed(
                &with(&|c| c["iss"] = json!("https://evil.test")),
                Some("k1"),
            ),
            JwtFailure::Issuer,
        ),
        (
            signed(&with(&|c| c["aud"] = json!("someone-else")), Some("k1")),
            JwtFailure::Audience,
        ),
        (
            signed(&claims(), Some("k2")),
            JwtFailure::UnknownKey(Some("k2".into())),
        ),
        (forged, JwtFailure::Signature),
        (
            unsigned(json!({"alg": "none", "typ": "JWT"}), &claims()),
            JwtFailure::Algorithm("none".into()),
        ),
        (hmac_with_public_key, JwtFailure::Algorithm("HS256".into())),
        (
            signed(&with(&|c| c["sub"] = json!(42)), Some("k1")),
            JwtFailure::Claim("sub".into()),
        ),
    ];
    for (token, failure) in cases {
        let result = admit(&gate, Some(&token)).await.map(|_| ());
        let message = result.as_ref().err().map(ToString::to_string);
        assert_eq!(result, refused(failure), "{message:?}");
    }
    // Within the 60 s leeway, a just-expired token passes.
    let late = signed(&with(&|c| c["exp"] = json!(now() - 30)), Some("k1"));
    assert!(admit(&gate, Some(&late)).await.is_ok());
}

#[tokio::test]
async fn without_auth_anyone_may_use_anything() {
    let config = parse("servers: []", &|_| None).unwrap();
    let gate = Gate::new(Credentials::load(&config.auth, &Views::new(&config.views)).unwrap());
    let caller = gate.admit(&headers(None), None).await.unwrap();
    assert!(caller.sees_all() && caller.may_use("anything"));
    assert_eq!(caller.key, CallerKey::anonymous());
}

#[tokio::test]
async fn a_client_certificate_is_required_when_a_ca_is_configured() {
    let config = parse("tls: {cert: c, key: k}\nauth: {client_ca: ca.pem}", &|_| {
        None
    })
    .unwrap();
    let gate = Gate::new(Credentials::load(&config.auth, &Views::new(&config.views)).unwrap());
    let refused = gate.admit(&headers(None), None).await.unwrap_err();
    assert_eq!(
        refused,
        RequestError::Unauthenticated(AuthFailure::ClientCertificateRequired)
    );
}

/// A self-signed certificate with these SANs and, if given, this subject CN (and nothing else
/// in its subject).
fn certificate(sans: Vec<rcgen::SanType>, cn: Option<&str>) -> CertificateDer<'static> {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    if let Some(cn) = cn {
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
    }
    params.subject_alt_names = sans;
    params.self_signed(&key).unwrap().der().clone()
}

#[tokio::test]
async fn a_client_certificate_names_its_caller_by_uri_dns_email_san_then_cn() {
    use rcgen::SanType::{DnsName, Rfc822Name, URI};
    let uri = |text: &str| URI(text.try_into().unwrap());
    let dns = |text: &str| DnsName(text.try_into().unwrap());
    let email = |text: &str| Rfc822Name(text.try_into().unwrap());
    let config = parse("tls: {cert: c, key: k}\nauth: {client_ca: ca.pem}", &|_| {
        None
    })
    .unwrap();
    let gate = Gate::new(Credentials::load(&config.auth, &Views::new(&config.views)).unwrap());
    let spiffe = "spiffe://example.org/ns/prod/sa/billing";
    let cases = [
        (
            certificate(
                vec![email("a@x.org"), dns("a.local"), uri(spiffe)],
                Some("a"),
            ),
            Some(spiffe),
        ),
        (
            certificate(vec![uri("spiffe://x/one"), uri("spiffe://x/two")], None),
            Some("spiffe://x/one"),
        ),
        (
            certificate(vec![email("a@x.org"), dns("a.local")], Some("a")),
            Some("a.local"),
        ),
        (
            certificate(vec![email("a@x.org")], Some("a")),
            Some("a@x.org"),
        ),
        (certificate(vec![], Some("agent-7")), Some("agent-7")),
        (certificate(vec![], None), None),
        (certificate(vec![], Some("")), None),
    ];
    for (cert, want) in cases {
        let admitted = gate
            .admit(&headers(None), Some(std::slice::from_ref(&cert)))
            .await;
        match want {
            Some(id) => {
                let caller = admitted.unwrap();
                assert_eq!(caller.key.kind, CallerKind::Certificate);
                assert_eq!(caller.key.id, id);
                assert_eq!(caller.first_kind(), CallerKind::Certificate);
            }
            None => assert_eq!(
                admitted.unwrap_err(),
                RequestError::Unauthenticated(AuthFailure::NoCertificateIdentity)
            ),
        }
    }
}
