//! Static bearer tokens: read from the environment or a file, kept as SHA-256 digests and
//! compared in constant time, each naming its caller and the tools it may use.

use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::domain::{
    config::{ConfigError, TokenSource, TokenSpec},
    grants::Access,
    views::Views,
};

/// One accepted token: its SHA-256 (equal lengths, so comparing leaks no length), and whom it
/// stands for.
struct Token {
    digest: [u8; 32],
    name: String,
    access: Access,
}

/// Every accepted static token.
pub struct StaticTokens(Vec<Token>);

impl StaticTokens {
    /// Reads token files; every unreadable or empty file is an error at its field.
    /// A token bound to a view sees only that view's tools, and prompts and resources only by
    /// its patterns (the config names only known views).
    pub fn load(specs: &[TokenSpec], views: &Views) -> Result<Self, Vec<ConfigError>> {
        let mut tokens = Vec::with_capacity(specs.len());
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
            tokens.push(Token {
                digest: Sha256::digest(value.as_bytes()).into(),
                name: spec.name.clone(),
                access,
            });
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
        // Every token is compared, matched or not, so timing says nothing about which one did.
        let mut found = None;
        for token in &self.0 {
            if bool::from(token.digest.ct_eq(&digest)) && found.is_none() {
                found = Some((token.name.as_str(), &token.access));
            }
        }
        found
    }
}
