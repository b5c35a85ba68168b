//! Static bearer tokens: read from the environment or a file, kept as SHA-256 digests and
//! found by the presented token's digest, each naming its caller and the tools it may use.
//!
//! The lookup is a hash map of digests, not a comparison of each: with 10,000 tokens a
//! constant-time pass over all of them cost every request tens of microseconds per thousand
//! tokens (docs/performance.md, "Many callers, round two"). What the map's timing can tell is
//! about the *digest* of what was presented, under a key chosen at random per process, and a
//! digest says nothing usable about a token that hashes near it.

use std::collections::{HashMap, hash_map::Entry};

use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};

use crate::domain::{
    config::{ConfigError, TokenSource, TokenSpec},
    grants::Access,
    views::Views,
};

/// Whom an accepted token stands for.
struct Token {
    name: String,
    access: Access,
}

/// Every accepted static token, by its SHA-256 (the first of any two with the same value).
pub struct StaticTokens(HashMap<[u8; 32], Token>);

impl StaticTokens {
    /// Reads token files; every unreadable or empty file is an error at its field.
    /// A token bound to a view sees only that view's tools, and prompts and resources only by
    /// its patterns (the config names only known views).
    pub fn load(specs: &[TokenSpec], views: &Views) -> Result<Self, Vec<ConfigError>> {
        let mut tokens = HashMap::with_capacity(specs.len());
        let mut errors = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let value = match &spec.source {
                TokenSource::Value(value) => value.expose_secret().to_owned(),
                TokenSource::File(path) => {
                    let field = format!("auth.tokens[{i}].value_file");
                    match std::fs::read_to_string(path) {
                        Ok(text) if text.trim().is_empty() => {
                            let reason = format!("the token file {} is empty", path.display());
                            errors.push(ConfigError::new(field, reason));
                            continue;
                        }
                        Ok(text) => text.trim().to_owned(),
                        Err(e) => {
                            let reason = format!("cannot read token file {}: {e}", path.display());
                            errors.push(ConfigError::new(field, reason));
                            continue;
                        }
                    }
                }
            };
            let view = match spec.view.as_deref().map(|view| views.get(view)).transpose() {
                Ok(view) => view.cloned(),
                Err(error) => {
                    let field = format!("auth.tokens[{i}].view");
                    errors.push(ConfigError::new(field, error.to_string()));
                    continue;
                }
            };
            let access = Access::of_token(&spec.tools, &spec.prompts, &spec.resources, view);
            let digest: [u8; 32] = Sha256::digest(value.as_bytes()).into();
            if let Entry::Vacant(place) = tokens.entry(digest) {
                place.insert(Token {
                    name: spec.name.clone(),
                    access,
                });
            }
        }
        if errors.is_empty() {
            Ok(Self(tokens))
        } else {
            Err(errors)
        }
    }

    /// Whether no token is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The name and access of the token `presented`, if it is one.
    pub fn find(&self, presented: &str) -> Option<(&str, &Access)> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let token = self.0.get(&digest)?;
        Some((token.name.as_str(), &token.access))
    }
}

#[cfg(test)]
mod tests {
    use secrecy::SecretString;

    use super::*;

    fn spec(name: &str, value: &str) -> TokenSpec {
        TokenSpec {
            name: name.into(),
            source: TokenSource::Value(SecretString::from(value.to_owned())),
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            view: None,
        }
    }

    #[test]
    fn a_token_is_found_among_thousands_by_its_whole_value_only() {
        let specs: Vec<_> = (0..10_000)
            .map(|i| spec(&format!("caller-{i}"), &format!("token-{i}")))
            .collect();
        let tokens = StaticTokens::load(&specs, &Views::default()).unwrap();
        for i in [0, 1, 4_999, 9_999] {
            let (name, _) = tokens.find(&format!("token-{i}")).unwrap();
            assert_eq!(name, format!("caller-{i}"));
        }
        for wrong in [
            "token-10000",
            "token-",
            "token-1 ",
            "TOKEN-1",
            "",
            "caller-1",
        ] {
            assert!(tokens.find(wrong).is_none(), "{wrong:?} is no token");
        }
    }

    #[test]
    fn of_two_tokens_with_one_value_the_first_stands() {
        let specs = [spec("first", "same"), spec("second", "same")];
        let tokens = StaticTokens::load(&specs, &Views::default()).unwrap();
        assert_eq!(tokens.find("same").unwrap().0, "first");
    }
}
