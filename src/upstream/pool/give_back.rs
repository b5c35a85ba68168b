//! Memory freed by closed sessions given back to the system. glibc's malloc keeps what is freed
//! in its arenas for reuse: after 1,000 per-caller sessions closed, the broker's RSS stayed
//! where it was with them open (docs/performance.md, "many callers"). A second after the last
//! of a burst of closes, `malloc_trim` returns the free pages of every arena. Elsewhere (musl,
//! other systems) it does nothing.

use std::{
    sync::{Condvar, Mutex, OnceLock, PoisonError},
    time::Duration,
};

/// How long closes must stop before the memory is given back: one trim per burst.
const QUIET: Duration = Duration::from_secs(1);

/// Closes so far, and the thread that trims after them.
struct Closes {
    count: Mutex<u64>,
    changed: Condvar,
}

/// Notes that a session closed: its memory is given back once closes stop for a second.
pub fn session_closed() {
    let closes = closes();
    *closes.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    closes.changed.notify_one();
}

/// The counter, and its thread (started on first use, living as long as the process; a
/// thread rather than a task, so that no runtime has to outlive it).
fn closes() -> &'static Closes {
    static CLOSES: OnceLock<&'static Closes> = OnceLock::new();
    CLOSES.get_or_init(|| {
        let closes: &'static Closes = Box::leak(Box::new(Closes {
            count: Mutex::new(0),
            changed: Condvar::new(),
        }));
        let started = std::thread::Builder::new()
            .name("toolbroker-give-back".into())
            .spawn(move || trim_after_closes(closes));
        if let Err(error) = started {
            tracing::warn!(%error, "no thread to give closed sessions' memory back");
        }
        closes
    })
}

fn trim_after_closes(closes: &Closes) {
    let lock = || closes.count.lock().unwrap_or_else(PoisonError::into_inner);
    let mut trimmed_at = 0;
    loop {
        let mut count = lock();
        while *count == trimmed_at {
            count = closes
                .changed
                .wait(count)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(count);
        // Quiet for QUIET: a burst of closes ends in one trim.
        loop {
            let seen = *lock();
            std::thread::sleep(QUIET);
            if *lock() == seen {
                trimmed_at = seen;
                break;
            }
        }
        trim();
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim() {
    // SAFETY: malloc_trim has no preconditions; it takes each arena's lock while it works.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
