//! Typed names, so a server name, a tool's original name and its exposed name never mix. Pure.

use std::{fmt, sync::Arc};

/// The longest name LLM function-calling APIs accept (`^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_EXPOSED_LEN: usize = 64;

/// Whether `c` may appear in a server name, a prefix or an exposed tool name.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Arc<str>);

        impl $name {
            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

name_type!(
    /// The configured name of an MCP server: letters, digits, `_` and `-`.
    ServerName
);
name_type!(
    /// A tool's name as its MCP server gives it (any text).
    ToolName
);
name_type!(
    /// The name a tool is exposed under: prefix + original name, valid for LLM APIs.
    ExposedName
);

impl ServerName {
    /// Checks a configured server name; the error says what is wrong with it.
    pub fn parse(name: &str) -> Result<Self, String> {
        if name.is_empty() {
            return Err("must not be empty".into());
        }
        if let Some(bad) = name.chars().find(|c| !is_name_char(*c)) {
            return Err(format!(
                "{name:?} contains {bad:?}; use only letters, digits, '_' and '-'"
            ));
        }
        Ok(Self(name.into()))
    }
}

impl ToolName {
    /// Wraps a tool name as the server sent it.
    pub fn new(name: &str) -> Self {
        Self(name.into())
    }
}

/// Characters of the hash suffix that keeps shortened names apart.
const HASH_LEN: usize = 8;

impl ExposedName {
    /// The exposed name of `original` under `prefix`, made valid for LLM function-calling APIs
    /// (`^[a-zA-Z0-9_-]{1,64}$`): other characters become `_`, and a name over 64 characters is
    /// cut and given a hash suffix of the full name, so different long names stay different.
    /// Also says whether the name had to change, so the caller can warn.
    pub fn derive(prefix: &str, original: &str) -> (Self, bool) {
        let wanted = format!("{prefix}{original}");
        let mut name: String = wanted
            .chars()
            .map(|c| if is_name_char(c) { c } else { '_' })
            .collect();
        if name.is_empty() {
            name.push('_');
        }
        if name.len() > MAX_EXPOSED_LEN {
            // All characters are ASCII here, so byte slicing is on char boundaries.
            name.truncate(MAX_EXPOSED_LEN - HASH_LEN - 1);
            name.push('_');
            name.push_str(&short_hash(&wanted));
        }
        let changed = name != wanted;
        (Self(name.into()), changed)
    }
}

/// A stable hash (FNV-1a, 32 bits, hex): the same name gets the same suffix on every run.
fn short_hash(text: &str) -> String {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(text.as_bytes());
    format!("{:08x}", hasher.finish() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposed(prefix: &str, original: &str) -> (String, bool) {
        let (name, changed) = ExposedName::derive(prefix, original);
        (name.as_str().to_owned(), changed)
    }

    fn valid(name: &str) -> bool {
        (1..=MAX_EXPOSED_LEN).contains(&name.len()) && name.chars().all(is_name_char)
    }

    #[test]
    fn valid_names_pass_unchanged() {
        assert_eq!(exposed("ev_", "get-sum"), ("ev_get-sum".into(), false));
        assert_eq!(exposed("", "echo"), ("echo".into(), false));
    }

    #[test]
    fn invalid_characters_become_underscores() {
        for (original, want) in [
            ("ns.tool", "ns_tool"),
            ("a/b:c", "a_b_c"),
            ("with space", "with_space"),
            ("ünï", "_n_"),
            ("", "_"),
        ] {
            let (name, changed) = exposed("", original);
            assert_eq!(name, want, "{original:?}");
            assert!(changed, "{original:?}");
        }
    }

    #[test]
    fn long_names_are_shortened_with_a_stable_hash() {
        let long = "x".repeat(100);
        let (name, changed) = exposed("p_", &long);
        assert!(changed);
        assert_eq!(name.len(), MAX_EXPOSED_LEN);
        assert!(valid(&name), "{name}");
        assert_eq!(exposed("p_", &long).0, name, "same input, same name");
        let (other, _) = exposed("p_", &format!("{long}y"));
        assert_ne!(other, name, "names differing past the cut stay different");
        assert_eq!(&name[..55], &other[..55]);
    }

    #[test]
    fn exactly_64_characters_is_kept() {
        let name = "a".repeat(64);
        assert_eq!(exposed("", &name), (name, false));
    }

    #[test]
    fn server_names_are_checked() {
        assert!(ServerName::parse("my-server_2").is_ok());
        assert!(ServerName::parse("").is_err());
        assert!(ServerName::parse("a.b").unwrap_err().contains("'.'"));
    }
}
