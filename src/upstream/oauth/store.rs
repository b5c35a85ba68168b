//! The token store `toolbroker login` writes and the broker reads, refreshes and writes back: one
//! JSON file per server, mode 0600, replaced whole (written aside, then renamed) so that a reader
//! never sees half a file. It holds what refreshing needs without discovery: the client, the
//! authorization server's metadata, rmcp's stored credentials, and the scope the server last
//! asked for that the login lacks (for the next `login` to ask for). With Redis
//! (`state.redis`) the same contents are kept there, and a store only in memory is rmcp's view
//! of them.

use std::{
    fs,
    io::{self, Write},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
};

use rmcp::transport::auth::{AuthError, AuthorizationMetadata, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

use crate::domain::outcome::OAuthFailure;

/// The file's contents.
#[derive(Clone, Serialize, Deserialize)]
pub struct TokenFile {
    /// The MCP server the tokens are for (its configured URL).
    pub server_url: String,
    /// The client the tokens were issued to.
    pub client_id: String,
    /// Its secret, when dynamic registration gave one (a configured secret wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The redirect URI the login used (a refresh names the same client configuration).
    pub redirect_uri: String,
    /// The authorization server's metadata, as discovery found it.
    pub metadata: AuthorizationMetadata,
    /// The tokens, as rmcp stores them.
    pub credentials: StoredCredentials,
    /// Scope the server asked for that the login does not grant (space-separated): the next
    /// `login` asks for it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_up: Option<String>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("server_url", &self.server_url)
            .field("client_id", &self.client_id)
            .field("credentials", &self.credentials)
            .field("step_up", &self.step_up)
            .finish_non_exhaustive()
    }
}

impl TokenFile {
    /// The access token it holds, if any.
    pub fn access_token(&self) -> Option<&str> {
        use oauth2::TokenResponse as _;
        self.credentials
            .token_response
            .as_ref()
            .map(|response| response.access_token().secret().as_str())
    }
}

/// One token store file, and its contents as last read or written.
#[derive(Clone)]
pub struct TokenStore(Arc<Inner>);

struct Inner {
    /// The file; with `persist` off, only where the contents are (for messages).
    path: PathBuf,
    /// Whether changes are written to `path`.
    persist: bool,
    file: Mutex<Option<TokenFile>>,
}

impl TokenStore {
    /// The store at `path`, not read yet.
    pub fn new(path: PathBuf) -> Self {
        Self(Arc::new(Inner {
            path,
            persist: true,
            file: Mutex::new(None),
        }))
    }

    /// A store in memory only, for contents its user keeps elsewhere (`shown` says where).
    pub fn in_memory(shown: PathBuf) -> Self {
        Self(Arc::new(Inner {
            path: shown,
            persist: false,
            file: Mutex::new(None),
        }))
    }

    /// The contents as last read or written.
    pub fn current(&self) -> Option<TokenFile> {
        self.lock().clone()
    }

    /// Reads the file again (in memory: the contents held); `None` when there is none.
    pub fn reload(&self) -> Result<Option<TokenFile>, OAuthFailure> {
        if !self.0.persist {
            return Ok(self.current());
        }
        let read = read(&self.0.path).map_err(|reason| self.failure(reason))?;
        *self.lock() = read.clone();
        Ok(read)
    }

    /// Holds `file` without writing it (a login before its tokens arrive).
    pub fn hold(&self, file: TokenFile) {
        *self.lock() = Some(file);
    }

    /// Changes the contents and writes them.
    pub fn update(&self, change: impl FnOnce(&mut TokenFile)) -> Result<(), OAuthFailure> {
        let mut held = self.lock();
        let Some(file) = held.as_mut() else {
            return Err(self.failure("there is nothing in it to change".into()));
        };
        change(file);
        if !self.0.persist {
            return Ok(());
        }
        write(&self.0.path, file).map_err(|e| self.failure(format!("cannot write it: {e}")))
    }

    fn failure(&self, reason: String) -> OAuthFailure {
        OAuthFailure::Store {
            store: self.0.path.clone(),
            reason,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<TokenFile>> {
        self.0.file.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The file at `path`; `None` when there is none.
fn read(path: &Path) -> Result<Option<TokenFile>, String> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read it: {error}")),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| format!("it is not a token store written by `toolbroker login`: {e}"))
}

/// Writes `file` beside `path` with mode 0600, then renames it over `path`. The file aside has
/// a random name and is created anew, never through a symlink: one planted where it would be
/// written (the name used to be predictable) is never followed, so the tokens cannot be sent
/// into another file.
pub fn write(path: &Path, file: &TokenFile) -> io::Result<()> {
    let json = serde_json::to_vec_pretty(file).map_err(io::Error::other)?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other("the token store path names no file"))?;
    let dir = crate::domain::paths::directory_of(path);
    let prefix = format!(".{}.", name.to_string_lossy());
    // Removed when dropped, if it was not renamed.
    let mut aside = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .make_in(dir, create_private)?;
    aside.write_all(&json)?;
    aside.as_file().sync_all()?;
    aside.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Creates `path` for writing with mode 0600: never an existing file (`create_new`), never
/// through a symlink (`O_NOFOLLOW`, which `create_new` implies; said for the reader).
fn create_private(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

fn store_error(failure: OAuthFailure) -> AuthError {
    AuthError::CredentialStoreError(failure.to_string())
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.current().map(|file| file.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.update(|file| file.credentials = credentials)
            .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.update(|file| file.credentials.token_response = None)
            .map_err(store_error)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn token_file() -> TokenFile {
        serde_json::from_value(serde_json::json!({
            "server_url": "https://mcp.example/mcp",
            "client_id": "broker",
            "redirect_uri": "http://127.0.0.1:1/callback",
            "metadata": {
                "authorization_endpoint": "https://as.example/authorize",
                "token_endpoint": "https://as.example/token",
            },
            "credentials": {"client_id": "broker", "token_response": null},
        }))
        .expect("a token file")
    }

    #[test]
    fn a_symlink_planted_where_the_file_is_written_aside_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let target = dir.path().join("victim");
        fs::write(&target, "keep me").unwrap();
        // Where the file aside used to be written, and a guess more.
        let planted = [
            format!(".tokens.json.{}.tmp", std::process::id()),
            ".tokens.json.tmp".to_owned(),
        ];
        for name in &planted {
            std::os::unix::fs::symlink(&target, dir.path().join(name)).unwrap();
        }
        write(&path, &token_file()).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep me");
        let mode = fs::symlink_metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let written: TokenFile = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(written.client_id, "broker");
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".tmp") && !planted.contains(name))
            .collect();
        assert!(left.is_empty(), "files left aside: {left:?}");
    }

    #[test]
    fn the_file_aside_is_never_opened_through_a_symlink_or_over_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        fs::write(&target, "keep me").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nothing"), &dangling).unwrap();
        for path in [&link, &dangling, &target] {
            let error = create_private(path).expect_err("refused");
            assert_eq!(error.kind(), io::ErrorKind::AlreadyExists, "{path:?}");
        }
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep me");
        assert!(!dir.path().join("nothing").exists());
    }
}
