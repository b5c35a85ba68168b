//! Memory freed by closed sessions given back to the system. glibc's malloc keeps what is freed
//! in its arenas for reuse: after 1,000 per-caller sessions closed, the broker's RSS stayed
//! where it was with them open (docs/performance.md, "many callers"). A second after the last
//! of a burst of closes, `malloc_trim` returns the free pages of every arena. Elsewhere (musl,
//! other systems) it does nothing.

use std::{
    sync::{Condvar, Mutex, Once, PoisonError},
    time::Duration,
};

/// How long closes must stop before the memory is given back: one trim per burst.
const QUIET: Duration = Duration::from_secs(1);

/// Closes so far, and the condition the trimming thread waits on.
struct Closes {
    count: Mutex<u64>,
    changed: Condvar,
}

impl Closes {
    /// None yet.
    const fn new() -> Self {
        Self {
            count: Mutex::new(0),
            changed: Condvar::new(),
        }
    }
}

static CLOSES: Closes = Closes::new();

/// Notes that a session closed: its memory is given back once closes stop for a second.
pub fn session_closed() {
    start_thread();
    *CLOSES.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    CLOSES.changed.notify_one();
}

/// Starts the trimming thread on first use; it lives as long as the process (a thread rather
/// than a task, so that no runtime has to outlive it).
fn start_thread() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let started = std::thread::Builder::new()
            .name("toolbroker-give-back".into())
            .spawn(|| trim_after_closes(&CLOSES, QUIET, trim));
        if let Err(error) = started {
            tracing::warn!(%error, "no thread to give closed sessions' memory back");
        }
    });
}

/// Calls `trim` once closes have stopped for `quiet`, after each burst of them; never returns.
fn trim_after_closes(closes: &Closes, quiet: Duration, trim: impl Fn()) {
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
        // Quiet for `quiet`: a burst of closes ends in one trim.
        loop {
            let seen = *lock();
            std::thread::sleep(quiet);
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A counter of its own with its thread, trimming into `trims`.
    fn closes_counted(quiet: Duration) -> (&'static Closes, &'static AtomicUsize) {
        let closes: &'static Closes = Box::leak(Box::new(Closes::new()));
        let trims: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        std::thread::spawn(move || {
            trim_after_closes(closes, quiet, || {
                trims.fetch_add(1, Ordering::SeqCst);
            })
        });
        (closes, trims)
    }

    fn close(closes: &Closes) {
        *closes.count.lock().unwrap() += 1;
        closes.changed.notify_one();
    }

    /// Waits (at most 10 s) for `trims` to reach `n`.
    fn wait_for(trims: &AtomicUsize, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while trims.load(Ordering::SeqCst) < n {
            assert!(std::time::Instant::now() < deadline, "no trim came");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_burst_of_closes_ends_in_one_trim_once_they_stop() {
        // A quiet time far longer than the burst takes, so the burst is one.
        let (closes, trims) = closes_counted(Duration::from_millis(300));
        for _ in 0..50 {
            close(closes);
        }
        wait_for(trims, 1);
        // Nothing closed since: no second trim, however long the thread waits.
        let settled = *closes.count.lock().unwrap();
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(trims.load(Ordering::SeqCst), 1, "one trim per burst");
        assert_eq!(*closes.count.lock().unwrap(), settled);

        // The next burst gets its own trim.
        for _ in 0..3 {
            close(closes);
        }
        wait_for(trims, 2);
    }

    #[test]
    fn no_trim_before_the_closes_stop() {
        // Closes every 10 ms for two seconds: never quiet for one (a loaded machine may
        // stall this thread, not for a second).
        let (closes, trims) = closes_counted(Duration::from_secs(1));
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_secs(2) {
            close(closes);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            trims.load(Ordering::SeqCst),
            0,
            "trimmed while closes went on"
        );
        wait_for(trims, 1);
    }
}
