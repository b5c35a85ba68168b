//! Reading the config file (the I/O around the pure `domain::config`): the file's text, the
//! environment for `${VAR}`, and the built-in demo configuration used without a file.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::domain::config::{self, Config, ConfigErrors};

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not a valid config.
    #[error("{}", prefixed(.path, .errors))]
    Invalid {
        /// The file.
        path: String,
        /// Every problem found.
        errors: ConfigErrors,
    },
}

fn prefixed(path: &str, errors: &ConfigErrors) -> String {
    let lines: Vec<String> = errors.0.iter().map(|e| format!("{path}: {e}")).collect();
    lines.join("\n")
}

/// A configuration and where it came from.
#[derive(Debug)]
pub struct Loaded {
    /// The validated configuration.
    pub config: Config,
    /// The file and its text, when there is one (reload reads it again).
    pub file: Option<(PathBuf, String)>,
}

/// Reads and validates a config file, expanding `${VAR}` from the environment. The files the
/// config names (tokens, TLS) are read when the app is built from it (`app::App::build`).
pub fn load(path: &Path) -> Result<Loaded, LoadError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: shown.clone(),
        source,
    })?;
    let config = parse(&shown, &text)?;
    Ok(Loaded {
        config,
        file: Some((path.to_owned(), text)),
    })
}

/// Validates a config's text (from the file `shown`), expanding `${VAR}` from the environment.
pub fn parse(shown: &str, text: &str) -> Result<Config, LoadError> {
    config::parse(text, &|name| std::env::var(name).ok()).map_err(|errors| LoadError::Invalid {
        path: shown.to_owned(),
        errors,
    })
}

/// The config used without `--config`: this executable's own demo server over stdio.
pub fn demo() -> anyhow::Result<Loaded> {
    let exe = std::env::current_exe().context("cannot find the toolbroker executable")?;
    let command = serde_json::to_string(&exe.to_string_lossy())?.replace('$', "$$");
    let yaml =
        format!("servers:\n  - name: demo\n    command: {command}\n    args: [demo-server]\n");
    let config = config::parse(&yaml, &|_| None).map_err(|errors| anyhow::anyhow!("{errors}"))?;
    Ok(Loaded { config, file: None })
}

impl Loaded {
    /// How the config is named in messages: its file, or the built-in demo.
    pub fn shown(&self) -> String {
        match &self.file {
            Some((path, _)) => path.display().to_string(),
            None => "(built-in demo config)".into(),
        }
    }
}

/// Why a file cannot be made at `path` (an audit log, a socket): its directory is missing.
pub fn missing_directory(path: &Path) -> Option<String> {
    let parent = crate::domain::paths::directory_of(path);
    (!parent.is_dir()).then(|| format!("{} is not a directory", parent.display()))
}
