//! A JWT issuer of the test's own: a freshly generated RSA key, its JWKS (as a file or served
//! over HTTP on 127.0.0.1), and tokens signed with it.

use std::{
    path::Path,
    sync::{Arc, Mutex, atomic::AtomicUsize, atomic::Ordering},
    time::{SystemTime, UNIX_EPOCH},
};

use jsonwebtoken::{Algorithm, EncodingKey, Header, jwk::Jwk, jwk::JwkSet};
use rsa::{Generate, pkcs8::EncodePrivateKey};
use serde_json::{Value, json};

/// The issuer name every test token carries.
pub const ISSUER: &str = "https://idp.test";
/// The audience the broker is configured with.
pub const AUDIENCE: &str = "toolbroker";

/// One signing key: its private PEM and public JWK (with its `kid`).
#[derive(Clone)]
pub struct Key {
    pem: String,
    /// The public half, as the JWKS lists it.
    pub jwk: Jwk,
}

impl Key {
    /// A new RSA key named `kid`.
    pub fn generate(kid: &str) -> Self {
        let pem = rsa::PrivateKey::generate()
            .to_pkcs8_pem(Default::default())
            .expect("PEM")
            .to_string();
        let encoding = EncodingKey::from_rsa_pem(pem.as_bytes()).expect("an RSA key");
        let mut jwk = Jwk::from_encoding_key(&encoding, Algorithm::RS256).expect("a JWK");
        jwk.common.key_id = Some(kid.into());
        Self { pem, jwk }
    }

    /// A token of `claims`, signed with this key.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = self.jwk.common.key_id.clone();
        let key = EncodingKey::from_rsa_pem(self.pem.as_bytes()).expect("an RSA key");
        jsonwebtoken::encode(&header, claims, &key).expect("signed")
    }

    /// A token for `sub` valid for five minutes, with `extra` claims added.
    pub fn token(&self, sub: &str, extra: Value) -> String {
        let mut claims = claims(sub);
        if let (Some(claims), Value::Object(extra)) = (claims.as_object_mut(), extra) {
            claims.extend(extra);
        }
        self.sign(&claims)
    }
}

/// Valid claims for `sub`: the test issuer and audience, expiring in five minutes.
pub fn claims(sub: &str) -> Value {
    json!({
        "sub": sub,
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now(),
        "exp": now() + 300,
    })
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The JWKS of `keys`, as JSON.
pub fn jwks(keys: &[&Key]) -> String {
    let set = JwkSet {
        keys: keys.iter().map(|k| k.jwk.clone()).collect(),
    };
    serde_json::to_string(&set).expect("a JWKS serializes")
}

/// Writes the JWKS of `keys` to `dir/jwks.json` and returns its path.
pub fn jwks_file(dir: &Path, keys: &[&Key]) -> String {
    let path = dir.join("jwks.json");
    std::fs::write(&path, jwks(keys)).expect("write the JWKS");
    path.display().to_string()
}

/// A JWKS served over HTTP; the keys can change, and fetches are counted.
pub struct JwksServer {
    /// Its URL.
    pub url: String,
    keys: Arc<Mutex<String>>,
    fetches: Arc<AtomicUsize>,
}

impl JwksServer {
    /// Serves the JWKS of `keys` on a free 127.0.0.1 port.
    pub async fn start(keys: &[&Key]) -> Self {
        let body = Arc::new(Mutex::new(jwks(keys)));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (served, counted) = (body.clone(), fetches.clone());
        let router = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                let body = served.lock().unwrap().clone();
                async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        body,
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self {
            url,
            keys: body,
            fetches,
        }
    }

    /// Serves the JWKS of `keys` from now on (a key rotation).
    pub fn rotate(&self, keys: &[&Key]) {
        *self.keys.lock().unwrap() = jwks(keys);
    }

    /// How many times the JWKS was fetched.
    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}
