//! Who is calling, and the caller values a per-caller server's config is filled in with:
//! `${caller.id}`, `${caller.token}`, `${caller.header.NAME}`, `${caller.claim.NAME}`. A
//! [`Template`] is a config string with such references left in (environment variables are
//! already expanded); [`Template::render`] fills them in for one caller, rendered injectively
//! (see [`render`]) where the value lands in a path, an argument or the environment. Pure.

mod render;

use std::{borrow::Cow, fmt};

use secrecy::{ExposeSecret, SecretString};

/// How a caller proved who it is; callers of different kinds never share a session, even with
/// equal ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallerKind {
    /// Auth is off: every caller is `anonymous`.
    Anonymous,
    /// A configured static token, by its name.
    Token,
    /// A verified JWT, by its caller claim.
    Jwt,
    /// A client certificate, by its identity (URI, DNS or email SAN, else subject CN).
    Certificate,
}

impl CallerKind {
    /// Its name in audit lines (`caller_kind`) and in rendered ids: `token`, `jwt`, `cert`,
    /// `anonymous`.
    pub fn name(self) -> &'static str {
        match self {
            CallerKind::Anonymous => "anonymous",
            CallerKind::Token => "token",
            CallerKind::Jwt => "jwt",
            CallerKind::Certificate => "cert",
        }
    }

    /// The kind named `name` (as [`CallerKind::name`] gives it).
    pub fn parse(name: &str) -> Option<Self> {
        use CallerKind::*;
        [Anonymous, Token, Jwt, Certificate]
            .into_iter()
            .find(|kind| kind.name() == name)
    }
}

/// A caller's identity: what per-caller sessions are keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallerKey {
    /// How it proved it.
    pub kind: CallerKind,
    /// Its id: `${caller.id}`.
    pub id: String,
}

impl CallerKey {
    /// The caller when auth is off.
    pub fn anonymous() -> Self {
        Self {
            kind: CallerKind::Anonymous,
            id: "anonymous".into(),
        }
    }

    /// The caller of the static token named `id` (for tests).
    #[cfg(test)]
    pub fn token(id: &str) -> Self {
        Self {
            kind: CallerKind::Token,
            id: id.into(),
        }
    }
}

/// `kind:id`, as in logs: `token:alice`, `cert:spiffe://example.org/agent`.
impl fmt::Display for CallerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.name(), self.id)
    }
}

/// What a caller brings to fill a template with.
pub trait CallerValues: Send + Sync {
    /// Who it is.
    fn key(&self) -> &CallerKey;
    /// The kind whose plain ids `${caller.id}` writes as they are: the first the `auth`
    /// section configures (tokens, then JWTs, then client certificates; anonymous without
    /// auth). Ids of any other kind are written with their kind and a digest.
    fn first_kind(&self) -> CallerKind;
    /// The bearer token as it was received: `${caller.token}`.
    fn token(&self) -> Option<&str>;
    /// A request header (gRPC metadata) it sent; `name` is lower-case.
    fn header(&self, name: &str) -> Option<Cow<'_, str>>;
    /// A claim of its JWT, as text (strings as they are, other values as JSON).
    fn claim(&self, name: &str) -> Option<Cow<'_, str>>;
}

/// One caller value a template refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallerRef {
    /// `${caller.id}`
    Id,
    /// `${caller.token}`
    Token,
    /// `${caller.header.NAME}` (NAME lower-case)
    Header(String),
    /// `${caller.claim.NAME}`
    Claim(String),
}

impl CallerRef {
    /// Reads the part after `caller.` of a reference; the error says what is accepted.
    pub fn parse(name: &str) -> Result<Self, String> {
        let valid =
            |text: &str, allowed: fn(char) -> bool| !text.is_empty() && text.chars().all(allowed);
        match name.split_once('.') {
            None if name == "id" => Ok(CallerRef::Id),
            None if name == "token" => Ok(CallerRef::Token),
            Some(("header", header)) if valid(header, is_header_char) => {
                Ok(CallerRef::Header(header.to_ascii_lowercase()))
            }
            Some(("claim", claim)) if valid(claim, is_claim_char) => {
                Ok(CallerRef::Claim(claim.to_owned()))
            }
            _ => Err(format!(
                "unknown caller value \"caller.{name}\"; use caller.id, caller.token, \
                 caller.header.NAME or caller.claim.NAME"
            )),
        }
    }
}

impl fmt::Display for CallerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallerRef::Id => f.write_str("caller.id"),
            CallerRef::Token => f.write_str("caller.token"),
            CallerRef::Header(name) => write!(f, "caller.header.{name}"),
            CallerRef::Claim(name) => write!(f, "caller.claim.{name}"),
        }
    }
}

fn is_header_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_.".contains(c)
}

fn is_claim_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_.:/".contains(c)
}

/// A piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text, environment variables already expanded.
    Text(String),
    /// A caller value, filled in per caller.
    Caller(CallerRef),
}

/// A config string with caller values still to fill in.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Template {
    parts: Vec<Part>,
}

/// Where a rendered value goes, which says whether caller values are rendered injectively
/// first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// An argument, an environment variable or the working directory: caller values are
    /// rendered injectively (see [`render`]), so that a caller named `../../etc` cannot leave
    /// its folder, `--serial` is no option, and two callers never share a file.
    Process,
    /// An HTTP header: values as they are (a header value is checked by HTTP itself).
    Header,
}

/// A caller value a call needs and its caller does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingValue(pub CallerRef);

impl fmt::Display for MissingValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hint = match &self.0 {
            CallerRef::Id => "",
            CallerRef::Token => " (send \"authorization: Bearer <token>\")",
            CallerRef::Header(_) => " (send it as request metadata)",
            CallerRef::Claim(_) => " (the caller's JWT has no such claim)",
        };
        write!(
            f,
            "the call needs ${{{}}}, which the caller did not send{hint}",
            self.0
        )
    }
}

impl Template {
    /// A template of text only.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            parts: vec![Part::Text(text.into())],
        }
    }

    /// A template of these parts (adjacent text is merged).
    pub fn from_parts(parts: impl IntoIterator<Item = Part>) -> Self {
        let mut merged: Vec<Part> = Vec::new();
        for part in parts {
            match (merged.last_mut(), part) {
                (Some(Part::Text(last)), Part::Text(more)) => last.push_str(&more),
                (_, Part::Text(text)) if text.is_empty() => {}
                (_, part) => merged.push(part),
            }
        }
        Self { parts: merged }
    }

    /// The caller values it refers to.
    pub fn caller_refs(&self) -> impl Iterator<Item = &CallerRef> {
        self.parts.iter().filter_map(|part| match part {
            Part::Caller(reference) => Some(reference),
            Part::Text(_) => None,
        })
    }

    /// Whether it refers to no caller value.
    pub fn is_fixed(&self) -> bool {
        self.caller_refs().next().is_none()
    }

    /// The text as it stands, caller references written back as `${caller.…}` (for templates
    /// that have none, the whole value).
    pub fn as_written(&self) -> String {
        self.parts
            .iter()
            .map(|part| match part {
                Part::Text(text) => text.clone(),
                Part::Caller(reference) => format!("${{{reference}}}"),
            })
            .collect()
    }

    /// The value for `caller`, caller values rendered injectively for a process destination.
    pub fn render(
        &self,
        caller: &dyn CallerValues,
        to: Destination,
    ) -> Result<String, MissingValue> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Caller(reference) => {
                    let value =
                        lookup(caller, reference).ok_or_else(|| MissingValue(reference.clone()))?;
                    match (to, reference) {
                        (Destination::Process, CallerRef::Id) => {
                            out.push_str(&render::rendered_id(caller.key(), caller.first_kind()));
                        }
                        (Destination::Process, _) => out.push_str(&render::rendered_value(&value)),
                        (Destination::Header, _) => out.push_str(&value),
                    }
                }
            }
        }
        Ok(out)
    }
}

/// A template equals a text when it has no caller value and reads exactly so.
impl PartialEq<&str> for Template {
    fn eq(&self, other: &&str) -> bool {
        self.is_fixed() && self.as_written() == *other
    }
}

/// Templates may hold text from the environment (secrets in `env` and `headers`): never shown.
impl fmt::Debug for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let refs: Vec<String> = self.caller_refs().map(ToString::to_string).collect();
        write!(f, "Template([REDACTED], caller values {refs:?})")
    }
}

/// A caller's value for `reference`; an empty value counts as missing.
fn lookup<'a>(caller: &'a dyn CallerValues, reference: &CallerRef) -> Option<Cow<'a, str>> {
    let value = match reference {
        CallerRef::Id => Some(Cow::Borrowed(caller.key().id.as_str())),
        CallerRef::Token => caller.token().map(Cow::Borrowed),
        CallerRef::Header(name) => caller.header(name),
        CallerRef::Claim(name) => caller.claim(name),
    };
    value.filter(|v| !v.is_empty())
}

/// Caller values given in the config: the values of the session that lists a per-caller
/// server's tools (`discovery`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedCaller {
    /// Its key (anonymous, id `discovery` unless configured).
    pub key: CallerKey,
    /// The first kind the `auth` section configures (see [`CallerValues::first_kind`]).
    pub first_kind: CallerKind,
    /// Its token, if configured.
    pub token: Option<SecretText>,
    /// Its headers (names lower-case).
    pub headers: Vec<(String, String)>,
    /// Its claims.
    pub claims: Vec<(String, String)>,
}

impl Default for FixedCaller {
    fn default() -> Self {
        Self {
            key: CallerKey {
                kind: CallerKind::Anonymous,
                id: "discovery".into(),
            },
            first_kind: CallerKind::Anonymous,
            token: None,
            headers: Vec::new(),
            claims: Vec::new(),
        }
    }
}

impl CallerValues for FixedCaller {
    fn key(&self) -> &CallerKey {
        &self.key
    }

    fn first_kind(&self) -> CallerKind {
        self.first_kind
    }

    fn token(&self) -> Option<&str> {
        self.token.as_ref().map(SecretText::expose)
    }

    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        find(&self.headers, name)
    }

    fn claim(&self, name: &str) -> Option<Cow<'_, str>> {
        find(&self.claims, name)
    }
}

fn find<'a>(pairs: &'a [(String, String)], name: &str) -> Option<Cow<'a, str>> {
    pairs
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| Cow::Borrowed(value.as_str()))
}

/// A secret string that compares equal by value (configs are compared on reload).
#[derive(Clone)]
pub struct SecretText(SecretString);

impl SecretText {
    /// The secret, for where it must go.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl From<String> for SecretText {
    fn from(value: String) -> Self {
        Self(value.into())
    }
}

impl PartialEq for SecretText {
    fn eq(&self, other: &Self) -> bool {
        self.expose() == other.expose()
    }
}

impl Eq for SecretText {}

impl fmt::Debug for SecretText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

#[cfg(test)]
mod tests;
