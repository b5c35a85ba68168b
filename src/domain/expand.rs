//! `${VAR}` expansion in configuration strings. Pure: the environment comes in as a lookup
//! function, so tests and `toolbroker check` see exactly what `serve` would.
//!
//! Syntax, following the shell where it matters:
//! - `${NAME}`: the value of NAME; an error when NAME is unset (set but empty is fine).
//! - `${NAME:-default}`: the default when NAME is unset or empty.
//! - `${NAME-default}`: the default only when NAME is unset.
//! - `$$`: a literal `$`.
//! - any other `$` stays as it is, so arguments such as the regex `a$` need no escaping.
//!
//! NAME is `[A-Za-z_][A-Za-z0-9_]*`. A default may itself hold `${...}` references; they are
//! expanded only when the default is used, as in the shell.
//!
//! `${caller.…}` is no environment variable but a caller value (see [`super::caller`]):
//! [`expand_template`] keeps it in the [`Template`] it returns; [`expand`] refuses it.

use std::fmt;

use super::caller::{CallerRef, Part, Template};

/// Looks up an environment variable: `None` when it is unset.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Why a string could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// Variables referenced without a default are unset: every one, in order, without repeats.
    #[error("{}", UnsetMessage(.0))]
    Unset(Vec<String>),
    /// A `${` has no closing `}`; `offset` is the byte index of its `$`.
    #[error(
        "unterminated \"${{\" at byte {offset}; close it with \"}}\" (write $$ for a literal $)"
    )]
    Unterminated {
        /// Byte index of the `$` that opens the reference.
        offset: usize,
    },
    /// `${}` or `${:-default}`: the name is missing.
    #[error("empty variable name in \"${{...}}\" at byte {offset}")]
    EmptyName {
        /// Byte index of the `$` that opens the reference.
        offset: usize,
    },
    /// The text between `${` and `}` is not a name, optionally followed by `:-` or `-` and a default.
    #[error(
        "invalid variable reference \"${{{reference}}}\" at byte {offset}; write ${{NAME}} or \
         ${{NAME:-default}} with NAME made of letters, digits and '_', not starting with a digit"
    )]
    Invalid {
        /// The text between the braces.
        reference: String,
        /// Byte index of the `$` that opens the reference.
        offset: usize,
    },
    /// `${caller.…}` names no caller value (the reason says which are).
    #[error("{reason}")]
    BadCallerValue {
        /// What is wrong.
        reason: String,
    },
    /// A caller value where there is no caller: anywhere but the `headers`, `env`, `args` and
    /// `cwd` of a server with `isolation: per-caller`.
    #[error(
        "${{{0}}} is a caller value: only the headers, env, args and cwd of a server with \
         \"isolation: per-caller\" may use caller values"
    )]
    CallerValue(CallerRef),
}

/// Formats the unset-variable message, naming each variable and how to give it a default.
struct UnsetMessage<'a>(&'a [String]);

impl fmt::Display for UnsetMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [one] => write!(
                f,
                "environment variable {one} is not set (write ${{{one}:-default}} to give a default)"
            ),
            many => write!(
                f,
                "environment variables {} are not set (write ${{NAME:-default}} to give a default)",
                many.join(", ")
            ),
        }
    }
}

/// Expands every `${...}` reference in `input` using `lookup`; a caller value is an error.
///
/// Reports every unset variable of the string at once; a syntax error stops at the first one.
pub fn expand(input: &str, lookup: Lookup<'_>) -> Result<String, ExpandError> {
    let template = expand_template(input, lookup)?;
    if let Some(reference) = template.caller_refs().next() {
        return Err(ExpandError::CallerValue(reference.clone()));
    }
    Ok(template.as_written())
}

/// Expands every environment reference in `input`, keeping `${caller.…}` references for
/// [`Template::render`].
pub fn expand_template(input: &str, lookup: Lookup<'_>) -> Result<Template, ExpandError> {
    let mut unset = Vec::new();
    let parts = expand_into(input, 0, lookup, &mut unset)?;
    if unset.is_empty() {
        Ok(Template::from_parts(parts))
    } else {
        Err(ExpandError::Unset(unset))
    }
}

/// Expands `input`, whose first byte sits at `base` in the original string (for error offsets),
/// pushing unset names to `unset` and carrying on so that all of them are reported.
fn expand_into(
    input: &str,
    base: usize,
    lookup: Lookup<'_>,
    unset: &mut Vec<String>,
) -> Result<Vec<Part>, ExpandError> {
    let mut parts = Vec::new();
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        let offset = base + (input.len() - rest.len()) + dollar;
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body_and_tail) = after.strip_prefix('{') {
            let close = closing_brace(body_and_tail).ok_or(ExpandError::Unterminated { offset })?;
            let body = &body_and_tail[..close];
            // The body starts two bytes ("${") after the dollar sign.
            for part in expand_reference(body, offset, offset + 2, lookup, unset)? {
                match part {
                    Part::Text(text) => out.push_str(&text),
                    caller => {
                        parts.push(Part::Text(std::mem::take(&mut out)));
                        parts.push(caller);
                    }
                }
            }
            rest = &body_and_tail[close + 1..];
        } else {
            // A lone `$` is literal: `a$`, `$1`, `$HOME` (only the braced form expands).
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    parts.push(Part::Text(out));
    Ok(parts)
}

/// The byte index of the `}` closing a reference whose body starts `text`, skipping nested
/// `${...}` (in defaults) and `$$` escapes; `None` when it is never closed.
fn closing_brace(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'$', Some(b'$')) => i += 1,
            (b'$', Some(b'{')) => {
                depth += 1;
                i += 1;
            }
            (b'}', _) if depth == 0 => return Some(i),
            (b'}', _) => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// How a reference treats a missing value.
#[derive(Clone, Copy)]
enum Fallback<'a> {
    /// `${NAME}`: required.
    None,
    /// `${NAME:-default}`: used when unset or empty.
    UnsetOrEmpty(&'a str),
    /// `${NAME-default}`: used when unset.
    Unset(&'a str),
}

/// Resolves one reference body (the text between `${` and `}`).
fn expand_reference(
    body: &str,
    offset: usize,
    body_start: usize,
    lookup: Lookup<'_>,
    unset: &mut Vec<String>,
) -> Result<Vec<Part>, ExpandError> {
    if let Some(name) = body.strip_prefix("caller.") {
        let reference =
            CallerRef::parse(name).map_err(|reason| ExpandError::BadCallerValue { reason })?;
        return Ok(vec![Part::Caller(reference)]);
    }
    let (name, fallback) = split_reference(body, offset)?;
    let value = lookup(name);
    let default = match (fallback, &value) {
        (Fallback::UnsetOrEmpty(d), None) | (Fallback::Unset(d), None) => Some(d),
        (Fallback::UnsetOrEmpty(d), Some(v)) if v.is_empty() => Some(d),
        _ => None,
    };
    if let Some(default) = default {
        let default_start = body_start + (body.len() - default.len());
        return expand_into(default, default_start, lookup, unset);
    }
    match value {
        Some(value) => Ok(vec![Part::Text(value)]),
        None => {
            if !unset.iter().any(|n| n == name) {
                unset.push(name.to_owned());
            }
            Ok(Vec::new())
        }
    }
}

/// Splits a reference body into the variable name and its fallback, checking the name.
fn split_reference(body: &str, offset: usize) -> Result<(&str, Fallback<'_>), ExpandError> {
    let name_len = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(body.len());
    let (name, rest) = body.split_at(name_len);
    let fallback = if rest.is_empty() {
        Fallback::None
    } else if let Some(d) = rest.strip_prefix(":-") {
        Fallback::UnsetOrEmpty(d)
    } else if let Some(d) = rest.strip_prefix('-') {
        Fallback::Unset(d)
    } else {
        return Err(invalid(body, offset));
    };
    if name.is_empty() {
        return Err(ExpandError::EmptyName { offset });
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(invalid(body, offset));
    }
    Ok((name, fallback))
}

fn invalid(body: &str, offset: usize) -> ExpandError {
    ExpandError::Invalid {
        reference: body.to_owned(),
        offset,
    }
}

#[cfg(test)]
mod tests {
    use super::{ExpandError, expand};
    use std::collections::HashMap;

    fn env() -> HashMap<&'static str, &'static str> {
        HashMap::from([
            ("HOME", "/home/me"),
            ("TOKEN", "s3cret"),
            ("EMPTY", ""),
            ("_X1", "x"),
        ])
    }

    fn run(input: &str) -> Result<String, ExpandError> {
        let env = env();
        expand(input, &|name| env.get(name).map(|v| (*v).to_owned()))
    }

    #[test]
    fn expands_references_and_escapes() {
        let cases = [
            ("plain", "plain"),
            ("", ""),
            ("${HOME}/bin", "/home/me/bin"),
            ("Bearer ${TOKEN}", "Bearer s3cret"),
            ("${HOME}${TOKEN}", "/home/mes3cret"),
            ("${_X1}", "x"),
            ("${EMPTY}", ""),
            ("${MISSING:-fallback}", "fallback"),
            ("${EMPTY:-fallback}", "fallback"),
            ("${HOME:-fallback}", "/home/me"),
            ("${MISSING-fallback}", "fallback"),
            ("${EMPTY-fallback}", ""),
            ("${MISSING:-}", ""),
            ("${MISSING:-a:-b-c}", "a:-b-c"),
            ("${MISSING:-${HOME}/x}", "/home/me/x"),
            ("${MISSING:-${ALSO_MISSING:-deep}}", "deep"),
            ("${HOME:-${UNUSED}}", "/home/me"),
            ("$${HOME}", "${HOME}"),
            ("a$$b", "a$b"),
            ("$$$$", "$$"),
            ("a$", "a$"),
            ("^a.*$", "^a.*$"),
            ("$HOME", "$HOME"),
            ("$1 and $", "$1 and $"),
            ("cost: 5$ ${TOKEN}", "cost: 5$ s3cret"),
            ("ü${HOME}ü", "ü/home/meü"),
        ];
        for (input, want) in cases {
            assert_eq!(run(input).as_deref(), Ok(want), "input {input:?}");
        }
    }

    #[test]
    fn reports_errors() {
        let unset =
            |names: &[&str]| ExpandError::Unset(names.iter().map(|n| n.to_string()).collect());
        let invalid = |reference: &str, offset| ExpandError::Invalid {
            reference: reference.into(),
            offset,
        };
        let cases = [
            ("${MISSING}", unset(&["MISSING"])),
            ("${A}-${B}-${A}", unset(&["A", "B"])),
            ("${MISSING:-${INNER}}", unset(&["INNER"])),
            ("x${HOME", ExpandError::Unterminated { offset: 1 }),
            ("${", ExpandError::Unterminated { offset: 0 }),
            ("${A:-${B}", ExpandError::Unterminated { offset: 0 }),
            ("ab${}", ExpandError::EmptyName { offset: 2 }),
            ("${:-x}", ExpandError::EmptyName { offset: 0 }),
            ("${1A}", invalid("1A", 0)),
            ("${A.B}", invalid("A.B", 0)),
            ("${A B}", invalid("A B", 0)),
            ("${A:=x}", invalid("A:=x", 0)),
            ("${MISSING:-${1}}", invalid("1", 11)),
        ];
        for (input, want) in cases {
            assert_eq!(run(input), Err(want), "input {input:?}");
        }
    }

    #[test]
    fn error_messages_name_the_fault() {
        let cases = [
            (
                "${TOKEN2}",
                "environment variable TOKEN2 is not set (write ${TOKEN2:-default} to give a default)",
            ),
            (
                "${A}${B}",
                "environment variables A, B are not set (write ${NAME:-default} to give a default)",
            ),
            (
                "${A",
                "unterminated \"${\" at byte 0; close it with \"}\" (write $$ for a literal $)",
            ),
            ("${}", "empty variable name in \"${...}\" at byte 0"),
        ];
        for (input, want) in cases {
            let err = run(input).expect_err(input);
            assert_eq!(err.to_string(), want, "input {input:?}");
        }
        let err = run("${9}").expect_err("digit name");
        assert!(
            err.to_string()
                .starts_with("invalid variable reference \"${9}\" at byte 0")
        );
    }

    #[test]
    fn lookup_sees_only_referenced_names() {
        let seen = std::cell::RefCell::new(Vec::new());
        let lookup = |name: &str| {
            seen.borrow_mut().push(name.to_owned());
            Some(format!("<{name}>"))
        };
        assert_eq!(
            expand("$A ${B} $${C} ${D:-x}", &lookup).as_deref(),
            Ok("$A <B> ${C} <D>")
        );
        assert_eq!(*seen.borrow(), ["B", "D"]);
    }
}
