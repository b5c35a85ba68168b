//! The gRPC services' Unix socket (`unix_listen`): bound before anything starts, like the TCP
//! port; a file left by a broker that died is replaced, a socket another process still
//! accepts on is not; the file is removed at stop if it is still the one this broker made.
//!
//! The socket appears at its path with its final mode (0660), never with the umask's: it is
//! bound in a private directory (0700) beside the path, given its mode there, and linked into
//! place. Binding under a narrower umask would do too, but the umask is the whole process's:
//! a thread creating a file or spawning a server meanwhile would get it as well.

use std::{
    io,
    os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use tokio::net::UnixListener;

use crate::domain::paths::directory_of;

/// Owner and group may connect: in a pod, the agent's container shares the group (fsGroup).
const MODE: u32 = 0o660;

/// The random characters of the private directory's name (`.` and these), beside the path.
const PRIVATE_RANDOM: usize = 6;

/// The socket's name in the private directory: short, as `sun_path` is.
const NAME_INSIDE: &str = "s";

/// The longest path `bind` can take: `sun_path`'s 108 bytes with the closing NUL.
const MAX_PATH: usize = 107;

/// Why `path` cannot be bound, as `check` reports it: its directory is missing, or a file
/// that is not a socket is in the way (which is never replaced).
pub fn problem(path: &Path) -> Option<String> {
    let inside = private_path_len(path);
    if inside > MAX_PATH {
        return Some(format!(
            "the directory of {} is too long: the socket is bound in a directory beside it \
             first, whose path would have {inside} bytes (at most {MAX_PATH})",
            path.display()
        ));
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => Some(format!(
            "{} exists and is not a socket; remove it or choose another path",
            path.display()
        )),
        Ok(_) => None,
        Err(_) => crate::config_file::missing_directory(path),
    }
}

/// The socket file this broker made, removed when dropped (at stop) unless another file has
/// taken its place since.
pub struct SocketFile {
    path: PathBuf,
    /// Device, inode and change time when made.
    made: (u64, u64, i64, i64),
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if identity(&self.path).ok() == Some(self.made) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn identity(path: &Path) -> io::Result<(u64, u64, i64, i64)> {
    let meta = std::fs::symlink_metadata(path)?;
    Ok((meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec()))
}

/// Binds `path`: a stale socket file (nothing accepts on it) is replaced; a live one, or any
/// other file, is an error.
pub fn bind(path: &Path) -> anyhow::Result<(UnixListener, SocketFile)> {
    if let Some(reason) = problem(path) {
        anyhow::bail!("unix_listen: {reason}");
    }
    // Connecting tells the three cases apart: no file, a stale socket, a live one.
    match std::os::unix::net::UnixStream::connect(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            std::fs::remove_file(path).with_context(|| {
                format!(
                    "unix_listen: cannot remove the stale socket {}",
                    path.display()
                )
            })?;
            tracing::info!(path = %path.display(), "replaced a stale socket file");
        }
        Ok(_) => anyhow::bail!(
            "unix_listen: another process accepts connections on {} (another broker?); \
             stop it or choose another path",
            path.display()
        ),
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "unix_listen: cannot tell whether {} is in use",
                    path.display()
                )
            });
        }
    }
    let listener = bind_privately(path)
        .with_context(|| format!("unix_listen: cannot listen on {}", path.display()))?;
    let made = identity(path)
        .with_context(|| format!("unix_listen: cannot read back {}", path.display()))?;
    let file = SocketFile {
        path: path.to_owned(),
        made,
    };
    Ok((listener, file))
}

/// The length of the socket's path in its private directory.
fn private_path_len(path: &Path) -> usize {
    let dir = directory_of(path).as_os_str().len();
    dir + "/.".len() + PRIVATE_RANDOM + "/".len() + NAME_INSIDE.len()
}

/// Binds a socket at `path` that is never reachable there with another mode than [`MODE`]:
/// bound in a new directory only the broker's user may enter, given its mode, then linked to
/// `path` (which fails if anything took `path` meanwhile: nothing is replaced).
fn bind_privately(path: &Path) -> io::Result<UnixListener> {
    let private = tempfile::Builder::new()
        .prefix(".")
        .rand_bytes(PRIVATE_RANDOM)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(directory_of(path))?;
    let inside = private.path().join(NAME_INSIDE);
    let listener = UnixListener::bind(&inside)?;
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(MODE))?;
    // A socket stays bound to its file, not its name: connecting to `path` reaches it.
    std::fs::hard_link(&inside, path)?;
    private.close()?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stale_socket_is_replaced_made_0660_and_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grpc.sock");
        // A socket file nothing accepts on: a listener bound, then dropped (the file stays).
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let (listener, file) = bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        let client = tokio::net::UnixStream::connect(&path).await;
        assert!(client.is_ok() && listener.accept().await.is_ok());
        drop(file);
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn a_live_socket_or_another_file_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("live.sock");
        let (_listener, _file) = bind(&live).unwrap();
        let error = bind(&live).err().expect("a live socket").to_string();
        assert!(
            error.contains("another process accepts connections"),
            "{error}"
        );
        assert!(tokio::net::UnixStream::connect(&live).await.is_ok());

        let plain = dir.path().join("notes.txt");
        std::fs::write(&plain, "keep me").unwrap();
        let error = bind(&plain).err().expect("a plain file").to_string();
        assert!(error.contains("is not a socket"), "{error}");
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "keep me");

        let error = bind(&dir.path().join("missing/grpc.sock"))
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("is not a directory"), "{error}");
    }

    #[tokio::test]
    async fn the_socket_is_never_seen_with_another_mode_and_nothing_is_left_beside_it() {
        use std::sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grpc.sock");
        let stop = Arc::new(AtomicBool::new(false));
        // Another thread looks at the path as fast as it can while the socket is bound again
        // and again: the umask here (022, usually) would show as 0755.
        let watcher = std::thread::spawn({
            let (path, stop) = (path.clone(), stop.clone());
            move || {
                let mut seen = std::collections::BTreeSet::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(meta) = std::fs::symlink_metadata(&path) {
                        seen.insert(meta.permissions().mode() & 0o777);
                    }
                }
                seen
            }
        });
        for _ in 0..300 {
            let (listener, file) = bind(&path).unwrap();
            drop(listener);
            drop(file);
        }
        stop.store(true, Ordering::Relaxed);
        let seen = watcher.join().unwrap();
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), [0o660], "modes seen");
        let (_listener, _file) = bind(&path).unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["grpc.sock"]);
    }

    #[test]
    fn a_directory_too_long_for_the_private_bind_is_a_problem() {
        let dir = format!("/{}", "d".repeat(96));
        assert!(
            problem(Path::new(&format!("{dir}/grpc.sock"))).is_none_or(|p| !p.contains("too long"))
        );
        let dir = format!("/{}", "d".repeat(100));
        let reason = problem(Path::new(&format!("{dir}/s"))).expect("too long");
        assert!(reason.contains("too long"), "{reason}");
    }

    #[tokio::test]
    async fn a_file_put_in_its_place_later_is_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grpc.sock");
        let (listener, file) = bind(&path).unwrap();
        drop(listener);
        std::fs::remove_file(&path).unwrap();
        let (_other, _other_file) = bind(&path).unwrap();
        drop(file);
        assert!(path.exists(), "the other broker's socket was removed");
    }
}
