//! Browser origins: the `Origin` a request carries, and the patterns that allow one
//! (`mcp_allowed_origins`, and the loopback origins the MCP face always accepts). A pattern is
//! `http://` or `https://`, a host and an optional port, where the port may be `*` (any);
//! without a port it means the scheme's default (80, 443), as an `Origin` header leaves it
//! out. Pure.

use std::fmt;

use url::Url;

/// An origin as a request's `Origin` header gives it: scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    /// The origin an `Origin` header names; `None` for `null` (a sandboxed page, a file) or
    /// anything that is not an http(s) origin.
    pub fn parse(header: &str) -> Option<Origin> {
        let url = Url::parse(header.trim()).ok()?;
        if !matches!(url.scheme(), "http" | "https") {
            return None;
        }
        Some(Origin {
            scheme: url.scheme().to_owned(),
            host: url.host_str()?.to_owned(),
            port: url.port_or_known_default()?,
        })
    }
}

/// A pattern of allowed origins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedOrigin {
    text: String,
    scheme: String,
    host: String,
    /// `None`: any port (`:*`).
    port: Option<u16>,
}

impl AllowedOrigin {
    /// Reads a pattern such as `https://app.example.com`, `http://localhost:*` or
    /// `https://[::1]:8443`: nothing before the scheme, no user, path, query or fragment.
    pub fn parse(text: &str) -> Result<AllowedOrigin, String> {
        let hint = "write an origin like https://app.example.com or http://localhost:* \
                    (a scheme, a host and an optional port, `*` for any port)";
        let trimmed = text.trim();
        let (base, any_port) = match trimmed.strip_suffix(":*") {
            Some(base) => (base, true),
            None => (trimmed, false),
        };
        let url = Url::parse(base).map_err(|e| format!("invalid origin {text:?} ({e}); {hint}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "invalid origin {text:?}: not http or https; {hint}"
            ));
        }
        let bare = url.username().is_empty()
            && url.password().is_none()
            && url.path() == "/"
            && !base.ends_with('/')
            && url.query().is_none()
            && url.fragment().is_none();
        let host = url
            .host_str()
            .filter(|host| !host.is_empty() && !host.contains('*'));
        let (Some(host), true) = (host, bare) else {
            return Err(format!(
                "invalid origin {text:?}: an origin has no path, user, query or wildcard host; \
                 {hint}"
            ));
        };
        if any_port && has_port(base) {
            return Err(format!("invalid origin {text:?}: two ports; {hint}"));
        }
        let port = match any_port {
            true => None,
            false => Some(url.port_or_known_default().ok_or_else(|| hint.to_owned())?),
        };
        Ok(AllowedOrigin {
            text: trimmed.to_owned(),
            scheme: url.scheme().to_owned(),
            host: host.to_owned(),
            port,
        })
    }

    /// Whether `origin` matches this pattern.
    pub fn allows(&self, origin: &Origin) -> bool {
        self.scheme == origin.scheme
            && self.host == origin.host
            && self.port.is_none_or(|port| port == origin.port)
    }
}

impl fmt::Display for AllowedOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether `base` (`scheme://host[:port]`) writes a port, even the scheme's default one.
fn has_port(base: &str) -> bool {
    let authority = base.split_once("://").map_or(base, |(_, rest)| rest);
    // An IPv6 host is bracketed, its colons inside.
    let after_host = authority
        .rsplit_once(']')
        .map_or(authority, |(_, rest)| rest);
    after_host.contains(':')
}

/// Whether the `Origin` header value `header` is allowed by one of `patterns`.
pub fn is_allowed(patterns: &[AllowedOrigin], header: &str) -> bool {
    Origin::parse(header).is_some_and(|origin| patterns.iter().any(|p| p.allows(&origin)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(texts: &[&str]) -> Vec<AllowedOrigin> {
        texts
            .iter()
            .map(|text| AllowedOrigin::parse(text).unwrap())
            .collect()
    }

    #[test]
    fn origins_are_allowed_by_scheme_host_and_port() {
        let allowed = patterns(&[
            "https://app.example.com",
            "http://localhost:*",
            "http://[::1]:*",
            "https://tools.example.com:8443",
        ]);
        let cases = [
            ("https://app.example.com", true),
            ("https://APP.example.com", true),
            ("https://app.example.com:443", true),
            ("https://app.example.com:444", false),
            ("http://app.example.com", false),
            ("https://evil.example", false),
            ("https://app.example.com.evil.example", false),
            ("http://localhost:6274", true),
            ("http://localhost", true),
            ("https://localhost:6274", false),
            ("http://[::1]:3000", true),
            ("http://127.0.0.1:3000", false),
            ("https://tools.example.com:8443", true),
            ("https://tools.example.com", false),
            ("null", false),
            ("", false),
            ("file:///etc", false),
            ("not an origin", false),
        ];
        for (header, want) in cases {
            assert_eq!(is_allowed(&allowed, header), want, "{header:?}");
        }
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for text in [
            "app.example.com",
            "*",
            "https://*.example.com",
            "https://app.example.com/",
            "https://app.example.com/path",
            "https://user@app.example.com",
            "https://app.example.com?x=1",
            "https://app.example.com:443:*",
            "ftp://app.example.com",
            "chrome-extension://abcdef",
            "https://",
            "",
        ] {
            assert!(AllowedOrigin::parse(text).is_err(), "{text:?} was accepted");
        }
    }
}
