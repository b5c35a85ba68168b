//! Transport checks: `transport`/`type`, `command`, `url` and the fields that go with each,
//! expanded and resolved to a [`TransportSpec`]. Pure.

use super::{
    HttpMode, HttpSpec, StdioSpec, Templates, TransportSpec, path,
    raw::{self, Pairs, RawServer},
    validate::Checker,
};
use crate::domain::caller::{CallerRef, Template};

/// Why `${caller.token}` may not be an argument.
const TOKEN_IN_ARGS: &str = "${caller.token} may not be in args: a command line is readable by \
     every local user (ps, /proc/*/cmdline); pass the token in env instead";

/// The transport as named by `transport` or `type`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Stdio,
    Sse,
    StreamableHttp,
}

/// A `transport` (or `type`) field as written.
struct KindField {
    kind: Kind,
    /// The field's path, for errors.
    at: String,
    /// The value as written, for errors.
    text: String,
}

/// An entry's transport fields, expanded; an expansion error leaves an empty value behind
/// (and an error), so that presence checks still see the field.
struct Fields {
    kind: Option<KindField>,
    command: Option<String>,
    args: Option<Vec<Template>>,
    env: Option<Templates>,
    cwd: Option<Template>,
    url: Option<String>,
    headers: Option<Templates>,
    inherit_env: Option<bool>,
}

impl Checker<'_, '_> {
    /// Resolves the transport from `transport`/`type`, `command` and `url`; caller values are
    /// allowed in `args`, `env`, `cwd` and `headers` of a `per_caller` server only.
    pub(super) fn transport(
        &mut self,
        raw: &mut RawServer,
        at: &str,
        dropped: &[String],
        per_caller: bool,
    ) -> Option<TransportSpec> {
        let fields = self.fields(raw, at, per_caller);
        match (&fields.command, &fields.url) {
            (Some(_), Some(_)) => {
                let reason =
                    "give either \"command\" (stdio) or \"url\" (sse, streamable-http), not both";
                self.error(at, reason);
                None
            }
            (None, None) => {
                if !dropped.iter().any(|k| k == "command" || k == "url") {
                    let reason = "missing \"command\" (stdio) or \"url\" (sse, streamable-http)";
                    self.error(at, reason);
                }
                None
            }
            (Some(_), None) => self.stdio(fields, at),
            (None, Some(_)) => self.http(fields, at),
        }
    }

    /// Reads and expands an entry's transport fields, reporting what is wrong with each alone.
    fn fields(&mut self, raw: &mut RawServer, at: &str, per_caller: bool) -> Fields {
        let kind = self.kind(raw.transport.take(), raw.kind.take(), at);
        let args_at = path::field(at, "args");
        let secrets_of = |named| Secrets { named, per_caller };
        Fields {
            kind,
            command: raw
                .command
                .take()
                .map(|c| self.non_empty(&c, &path::field(at, "command"))),
            args: raw.args.take().map(|args| {
                let expand = |(i, arg): (usize, raw::Text)| {
                    let at = path::index(&args_at, i);
                    let template = self.template(&arg.0, &at, per_caller).unwrap_or_default();
                    if template.caller_refs().any(|r| *r == CallerRef::Token) {
                        self.error(&at, TOKEN_IN_ARGS);
                    }
                    template
                };
                args.into_iter().enumerate().map(expand).collect()
            }),
            env: raw
                .env
                .take()
                .map(|env| self.secrets(env, &path::field(at, "env"), secrets_of(Named::Env))),
            cwd: raw.cwd.take().map(|cwd| {
                let at = path::field(at, "cwd");
                let template = self.template(&cwd, &at, per_caller);
                if template
                    .as_ref()
                    .is_some_and(|t| t.is_fixed() && t.as_written().trim().is_empty())
                {
                    self.empty(&cwd, &at);
                }
                template.unwrap_or_default()
            }),
            url: raw
                .url
                .take()
                .map(|url| self.url(&url, &path::field(at, "url"))),
            headers: raw
                .headers
                .take()
                .map(|h| self.secrets(h, &path::field(at, "headers"), secrets_of(Named::Header))),
            inherit_env: raw.inherit_env.take(),
        }
    }

    /// The `transport` (or mcp.json `type`) field, if given and valid.
    fn kind(
        &mut self,
        transport: Option<String>,
        kind: Option<String>,
        at: &str,
    ) -> Option<KindField> {
        let (field, text) = match (transport, kind) {
            (None, None) => return None,
            (Some(_), Some(_)) => {
                let reason = "\"type\" is another name for \"transport\"; give only one";
                self.error(&path::field(at, "type"), reason);
                return None;
            }
            (Some(text), None) => ("transport", text),
            (None, Some(text)) => ("type", text),
        };
        let field_at = path::field(at, field);
        // Forgiving about case and separators: mcp.json files say "streamableHttp" too.
        let kind = match text.to_lowercase().replace(['-', '_'], "").as_str() {
            "stdio" => Kind::Stdio,
            "sse" => Kind::Sse,
            "streamablehttp" | "http" => Kind::StreamableHttp,
            _ => {
                let hint = raw::suggest(&text, &["stdio", "sse", "streamable-http", "http"]);
                self.error(&field_at, format!("unknown transport {text:?}; {hint}"));
                return None;
            }
        };
        Some(KindField {
            kind,
            at: field_at,
            text,
        })
    }

    /// A stdio server: `transport`, if given, must agree, and HTTP-only fields are refused.
    fn stdio(&mut self, fields: Fields, at: &str) -> Option<TransportSpec> {
        if let Some(field) = &fields.kind
            && field.kind != Kind::Stdio
        {
            let text = &field.text;
            let reason =
                format!("transport {text:?} needs \"url\", but this server has \"command\"");
            self.error(&field.at, reason);
        }
        if fields.headers.is_some() {
            let reason =
                "only for sse and streamable-http servers (with \"url\"), not with \"command\"";
            self.error(&path::field(at, "headers"), reason);
        }
        Some(TransportSpec::Stdio(StdioSpec {
            command: fields.command?,
            args: fields.args.unwrap_or_default(),
            env: fields.env.unwrap_or_default(),
            cwd: fields.cwd,
            inherit_env: fields.inherit_env.unwrap_or(false),
        }))
    }

    /// An HTTP server: `transport`, if given, picks the mode; stdio-only fields are refused.
    fn http(&mut self, fields: Fields, at: &str) -> Option<TransportSpec> {
        let mode = match &fields.kind {
            None => HttpMode::Auto,
            Some(field) => match field.kind {
                Kind::StreamableHttp => HttpMode::StreamableHttp,
                Kind::Sse => HttpMode::Sse,
                Kind::Stdio => {
                    let text = &field.text;
                    let reason = format!(
                        "transport {text:?} needs \"command\", but this server has \"url\""
                    );
                    self.error(&field.at, reason);
                    HttpMode::Auto
                }
            },
        };
        let stdio_only = [
            ("args", fields.args.is_some()),
            ("env", fields.env.is_some()),
            ("cwd", fields.cwd.is_some()),
            ("inherit_env", fields.inherit_env.is_some()),
        ];
        for (field, _) in stdio_only.iter().filter(|(_, given)| *given) {
            let reason = "only for stdio servers (with \"command\"), not with \"url\"";
            self.error(&path::field(at, field), reason);
        }
        Some(TransportSpec::Http(HttpSpec {
            url: fields.url?,
            mode,
            headers: fields.headers.unwrap_or_default(),
        }))
    }

    /// Expands `raw`, which must not end up empty (or blank).
    fn non_empty(&mut self, raw: &str, at: &str) -> String {
        let value = self.expand(raw, at);
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            self.empty(raw, at);
        }
        value.unwrap_or_default()
    }

    /// Reports that `raw` is, or expands to, nothing.
    fn empty(&mut self, raw: &str, at: &str) {
        let reason = if raw.trim().is_empty() {
            "must not be empty".to_owned()
        } else {
            format!("{raw:?} expands to an empty value")
        };
        self.error(at, reason);
    }

    /// Expands and checks a URL; the message shows it as written, so no secret leaks.
    pub(super) fn url(&mut self, raw: &str, at: &str) -> String {
        let Some(url) = self.expand(raw, at) else {
            return String::new();
        };
        let lower = url.to_ascii_lowercase();
        let rest = lower
            .strip_prefix("http://")
            .or_else(|| lower.strip_prefix("https://"));
        match rest {
            None => self.error(
                at,
                format!("invalid url {raw:?}; it must start with http:// or https://"),
            ),
            Some(rest) if rest.is_empty() || rest.starts_with(['/', '?', '#']) => {
                self.error(at, format!("invalid url {raw:?}; it has no host"));
            }
            Some(_) => {}
        }
        url
    }

    /// Expands the values of an env or headers map, vetting each name and value.
    fn secrets(&mut self, pairs: Pairs, at: &str, of: Secrets) -> Templates {
        let named = of.named;
        let mut secrets = Templates::new();
        for (key, value) in pairs.0 {
            let key_at = path::field(at, &key);
            let Some(value) = self.template(&value.0, &key_at, of.per_caller) else {
                continue;
            };
            if let Some(reason) = named.vet(&key, &value.as_written()) {
                self.error(&key_at, reason);
            }
            // HTTP header names ignore case: two spellings would be sent as one header.
            if named == Named::Header && secrets.keys().any(|k| k.eq_ignore_ascii_case(&key)) {
                self.error(
                    &key_at,
                    format!("header {key:?} is given twice (names ignore case)"),
                );
            }
            secrets.insert(key, value);
        }
        secrets
    }
}

/// Which map of secrets is checked, and whether it may hold caller values.
#[derive(Clone, Copy)]
struct Secrets {
    named: Named,
    per_caller: bool,
}

/// What a map of secrets names: environment variables or HTTP headers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Named {
    Env,
    Header,
}

impl Named {
    /// What is wrong with a name or value; the value is a secret, so only its fault is named.
    fn vet(self, name: &str, value: &str) -> Option<String> {
        match self {
            Named::Env if name.is_empty() || name.contains(['=', '\0']) => {
                Some(format!("invalid environment variable name {name:?}"))
            }
            Named::Env if value.contains('\0') => Some("the value contains a NUL character".into()),
            // Header names are RFC 9110 tokens; a line break in a value would split the request.
            Named::Header if name.is_empty() || !name.chars().all(is_token_char) => {
                Some(format!("invalid header name {name:?}"))
            }
            Named::Header if is_transport_header(name) => Some(format!(
                "header {name:?} is set by the MCP transport itself and cannot be configured"
            )),
            Named::Header if value.chars().any(|c| c.is_control() && c != '\t') => {
                Some("the value contains a control character such as a line break".into())
            }
            Named::Env | Named::Header => None,
        }
    }
}

/// Headers the MCP HTTP transports manage (content negotiation, sessions, resumption).
fn is_transport_header(name: &str) -> bool {
    const MANAGED: [&str; 5] = [
        "accept",
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
    ];
    MANAGED
        .iter()
        .any(|managed| name.eq_ignore_ascii_case(managed))
}

/// Whether `c` may appear in an HTTP header name (an RFC 9110 `tchar`).
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}
