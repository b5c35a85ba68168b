//! How a caller value is written where a process sees it (its arguments, environment and
//! working directory): injectively, so that two different callers (by kind or by id), or two
//! different values, never give the same text; readable where it can be; never starting with
//! `-` (an option) or `.` (a hidden or parent folder); never holding `/`. Pure.
//!
//! - A plain id (`[A-Za-z0-9._@-]`, at most 64 characters, not starting with `-` or `.`) of
//!   the first kind the `auth` section configures is written as it is: `alice`. So is a plain
//!   header or claim value.
//! - Anything else is a readable part, `~`, and 16 hex digits of the SHA-256 of the exact
//!   kind and value: `Li_Lei~3f2a9c0e1b7d4a55` (`李雷`), `jwt.alice~…` (a JWT's `alice` when
//!   static tokens come first), `a_b~…` (`a/b`). A plain text never holds `~`, so the two forms
//!   never meet; two digests meet only by a 64-bit SHA-256 collision, which no caller can aim
//!   at another given caller (that takes a second preimage).

use std::fmt::Write;

use sha2::{Digest, Sha256};

use super::{CallerKey, CallerKind};

/// The longest value written as it is (a file name has room for it, and its digest form).
const MAX_PLAIN: usize = 64;
/// The longest readable part of a digest form (the rest is in the digest).
const MAX_READABLE: usize = 48;
/// Hex digits of the digest: 64 bits.
const DIGEST_HEX: usize = 16;

/// `${caller.id}` for `key`, where `first_kind` is the kind whose plain ids are written as
/// they are.
pub fn rendered_id(key: &CallerKey, first_kind: CallerKind) -> String {
    if key.kind == first_kind && is_plain(&key.id) {
        return key.id.clone();
    }
    let readable = if key.kind == first_kind {
        readable(&key.id)
    } else {
        format!("{}.{}", key.kind.name(), readable(&key.id))
    };
    format!("{readable}~{}", digest(key.kind.name(), &key.id))
}

/// A header, claim or token value as a process gets it: as it is when plain, else its
/// readable part and digest.
pub fn rendered_value(value: &str) -> String {
    if is_plain(value) {
        return value.to_owned();
    }
    format!("{}~{}", readable(value), digest("value", value))
}

/// Whether `text` is written as it is.
fn is_plain(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_PLAIN
        && !text.starts_with(['-', '.'])
        && text.chars().all(is_plain_char)
}

fn is_plain_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._@-".contains(c)
}

/// `value` transliterated to ASCII (deunicode: `李雷` → `Li Lei`), anything not plain as one
/// `_`, without leading `-`, `.` or `_`, cut to [`MAX_READABLE`]; `_` when nothing is left.
fn readable(value: &str) -> String {
    let head: String = value.chars().take(MAX_READABLE).collect();
    let mut out = String::with_capacity(MAX_READABLE);
    for c in deunicode::deunicode(&head).chars() {
        let c = if is_plain_char(c) { c } else { '_' };
        let leading = out.is_empty() && matches!(c, '-' | '.' | '_');
        if leading || (c == '_' && out.ends_with('_')) {
            continue;
        }
        out.push(c);
        if out.len() >= MAX_READABLE {
            break;
        }
    }
    let kept = out.trim_end_matches('_').len();
    out.truncate(kept);
    if out.is_empty() {
        out.push('_');
    }
    out
}

/// The first [`DIGEST_HEX`] hex digits of SHA-256(`tag`, NUL, `value`).
fn digest(tag: &str, value: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(tag.as_bytes());
    hash.update([0]);
    hash.update(value.as_bytes());
    let bytes = hash.finalize();
    bytes[..DIGEST_HEX / 2]
        .iter()
        .fold(String::with_capacity(DIGEST_HEX), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

#[cfg(test)]
mod tests;
