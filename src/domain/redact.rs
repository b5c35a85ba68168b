//! What a status message must not show: the userinfo (`user:password@`) and the query string
//! of any URL in it (a secret put in a server's `url`, or an upstream's error quoting the URL
//! it was sent). Pure.

use std::borrow::Cow;

use url::Url;

/// `text` with every URL's userinfo, query and fragment taken out (`https://u:p@h/x?k=v` is
/// `https://h/x`); the rest as it was.
pub fn urls(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = scheme_start(&rest[..at]);
        let end = at + rest[at..].find(ends_url).unwrap_or(rest.len() - at);
        out.push_str(&rest[..start]);
        out.push_str(&without_secrets(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Where the scheme that ends `before` starts (its letters, digits, `+`, `-`, `.`).
fn scheme_start(before: &str) -> usize {
    before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        .last()
        .map_or(before.len(), |(i, _)| i)
}

/// Whether `c` ends a URL written in running text.
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | ')' | ',' | ';')
}

/// One URL without its userinfo, query and fragment; one that does not parse, cut at its
/// first `@`-free part and `?`, so that nothing after either is kept.
fn without_secrets(candidate: &str) -> Cow<'_, str> {
    let Ok(mut url) = Url::parse(candidate) else {
        let (scheme, rest) = candidate.split_once("://").unwrap_or(("", candidate));
        let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        let rest = rest.split(['?', '#']).next().unwrap_or_default();
        return Cow::Owned(format!("{scheme}://{rest}"));
    };
    if url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none()
    {
        return Cow::Borrowed(candidate);
    }
    // Fails only for URLs that cannot have userinfo (then they have none).
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    Cow::Owned(url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_and_queries_are_taken_out_of_every_url() {
        let cases = [
            ("connected", "connected"),
            (
                "error sending request for url (https://bob:s3cret@api.example.com/mcp?key=abc)",
                "error sending request for url (https://api.example.com/mcp)",
            ),
            (
                "GET http://h:8080/sse?token=t#frag failed; retry http://ok.example/x",
                "GET http://h:8080/sse failed; retry http://ok.example/x",
            ),
            (
                "see https://example.com/a, then",
                "see https://example.com/a, then",
            ),
            ("bad http://user:pw@[::1/x?y=1 end", "bad http://[::1/x end"),
        ];
        for (text, want) in cases {
            assert_eq!(urls(text), want, "{text}");
        }
    }

    #[test]
    fn no_secret_survives_whatever_surrounds_it() {
        for before in ["", "x ", "(", "\"", "url="] {
            for after in ["", " y", ")", "\"", ","] {
                let text = format!("{before}wss://me:SECRET@h.example/p?SECRET=1{after}");
                let shown = urls(&text);
                assert!(!shown.contains("SECRET"), "{text} -> {shown}");
                assert!(shown.contains("h.example/p"), "{text} -> {shown}");
            }
        }
    }
}
