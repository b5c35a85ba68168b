//! Paths as the broker reads them from its config (pure: no file system).

use std::path::Path;

/// The directory `path` is in: `.` for a bare file name.
pub fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_in_the_current_directory() {
        assert_eq!(directory_of(Path::new("audit.jsonl")), Path::new("."));
        assert_eq!(
            directory_of(Path::new("/var/log/a.jsonl")),
            Path::new("/var/log")
        );
        assert_eq!(directory_of(Path::new("/")), Path::new("."));
    }
}
