//! What both HTTP transports share: the HTTP client (rustls with the system's root
//! certificates, no OpenSSL; redirects followed within the request's origin only) and the
//! configured headers.

pub(crate) mod detect;
pub(crate) mod streamable;

use std::sync::{Arc, PoisonError, RwLock};

use http::{HeaderMap, HeaderName, HeaderValue};
use secrecy::ExposeSecret;

use crate::upstream::transport::explain::explain;
use secrecy::SecretString;

use crate::domain::outcome::StartFailure;

/// The HTTP client for one server. TLS uses ring and the platform's root certificates.
pub fn client() -> Result<reqwest::Client, StartFailure> {
    crate::tls_provider::install();
    reqwest::Client::builder()
        .redirect(redirect_policy())
        .build()
        .map_err(|e| StartFailure::HttpClient(explain(&e)))
}

/// The most redirects followed for one request (as reqwest's default).
const MAX_REDIRECTS: usize = 10;

/// Redirects are followed within the origin of the URL asked for, and no further. A request
/// carries what another origin must not get: the server's configured headers (often secrets;
/// reqwest drops only `Authorization` and cookies across origins), its session id, and to a
/// token endpoint the client's credentials in the body a 307 sends again. From https to http
/// is another origin too.
pub fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        match redirect_refusal(attempt.previous(), attempt.url()) {
            None => attempt.follow(),
            Some(reason) => attempt.error(reason),
        }
    })
}

/// Why a redirect to `next` after `previous` (the URL asked for first) is not followed, if
/// it is not.
fn redirect_refusal(previous: &[url::Url], next: &url::Url) -> Option<String> {
    let first = previous.first()?;
    let to = next.origin().ascii_serialization();
    if previous.len() > MAX_REDIRECTS {
        Some(format!("more than {MAX_REDIRECTS} redirects"))
    } else if first.scheme() == "https" && next.scheme() != "https" {
        Some(format!("redirected from https to {to}: not followed"))
    } else if next.origin() != first.origin() {
        Some(format!(
            "redirected to another origin ({to}): not followed, as the request carries the \
             server's headers; configure the URL it redirects to"
        ))
    } else {
        None
    }
}

/// The configured headers, their values marked sensitive so that no Debug output shows them.
pub fn headers(configured: &[(String, SecretString)]) -> Result<HeaderMap, StartFailure> {
    let mut map = HeaderMap::with_capacity(configured.len());
    for (name, value) in configured {
        let name = HeaderName::try_from(name.as_str())
            .map_err(|_| StartFailure::BadHeaderName(name.clone()))?;
        let mut value = HeaderValue::try_from(value.expose_secret())
            .map_err(|_| StartFailure::BadHeaderValue(name.to_string()))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

/// The headers of one session, read for every request it sends: a per-caller session's are
/// replaced when its caller's values change (a new token), without a new session.
#[derive(Debug, Clone, Default)]
pub struct SharedHeaders(Arc<RwLock<HeaderMap>>);

impl SharedHeaders {
    /// Headers that start as `headers`.
    pub fn new(headers: HeaderMap) -> Self {
        Self(Arc::new(RwLock::new(headers)))
    }

    /// The headers now.
    pub fn get(&self) -> HeaderMap {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the headers when they differ; later requests send the new ones.
    pub fn set(&self, headers: HeaderMap) {
        if *self.0.read().unwrap_or_else(PoisonError::into_inner) != headers {
            *self.0.write().unwrap_or_else(PoisonError::into_inner) = headers;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> url::Url {
        url::Url::parse(text).unwrap()
    }

    #[test]
    fn redirects_are_followed_within_the_origin_only() {
        let cases = [
            ("https://a.example/mcp", "https://a.example/mcp/", true),
            ("https://a.example/mcp", "https://a.example:443/v2", true),
            (
                "http://127.0.0.1:8080/mcp",
                "http://127.0.0.1:8080/other",
                true,
            ),
            ("https://a.example/mcp", "http://a.example/mcp", false),
            ("https://a.example/mcp", "https://b.example/mcp", false),
            ("https://a.example/mcp", "https://a.example:8443/mcp", false),
            ("http://a.example/mcp", "https://a.example/mcp", false),
            (
                "http://127.0.0.1:8080/mcp",
                "http://127.0.0.1:8081/mcp",
                false,
            ),
        ];
        for (from, to, followed) in cases {
            let refusal = redirect_refusal(&[url(from)], &url(to));
            assert_eq!(refusal.is_none(), followed, "{from} -> {to}: {refusal:?}");
        }
        let downgrade = redirect_refusal(&[url("https://a.example/")], &url("http://a.example/"));
        assert!(
            downgrade
                .unwrap()
                .contains("from https to http://a.example")
        );
    }

    #[test]
    fn each_hop_is_judged_against_the_url_asked_for_and_the_hops_are_bounded() {
        let first = url("https://a.example/1");
        let hops: Vec<_> = (0..=MAX_REDIRECTS)
            .map(|i| url(&format!("https://a.example/{i}")))
            .collect();
        assert!(redirect_refusal(&hops[..MAX_REDIRECTS], &first).is_none());
        let too_many = redirect_refusal(&hops, &first).unwrap();
        assert!(too_many.contains("more than 10 redirects"), "{too_many}");
        let away = [first.clone(), url("https://a.example/2")];
        assert!(redirect_refusal(&away, &url("https://b.example/")).is_some());
    }
}
