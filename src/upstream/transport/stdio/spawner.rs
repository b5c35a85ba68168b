//! The one thread that forks every stdio server. Linux sends a child its parent-death signal
//! (our SIGKILL, so that no server outlives the broker) when the *thread* that forked it
//! exits, not the process. tokio's threads come and go: a worker that runs `block_in_place`
//! may end up in the blocking pool, whose idle threads exit after 10 s. A server forked on
//! such a thread was killed 10 s later, and its tools went with it. This thread lives as long
//! as the process.

use std::{
    panic::{AssertUnwindSafe, catch_unwind, resume_unwind},
    sync::{OnceLock, mpsc},
};

type Job = Box<dyn FnOnce() + Send>;

/// Runs `fork` on the spawner thread, inside the caller's tokio runtime (if any, so that the
/// child and its pipes belong to it), and returns what it returned. It blocks the caller
/// for as long as the fork takes, as forking on the caller's own thread would.
pub fn on_spawner_thread<T: Send + 'static>(fork: impl FnOnce() -> T + Send + 'static) -> T {
    let runtime = tokio::runtime::Handle::try_current().ok();
    let (done, outcome) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _entered = runtime.as_ref().map(tokio::runtime::Handle::enter);
        // A panic goes back to the caller; the thread stays for the next fork.
        let _ = done.send(catch_unwind(AssertUnwindSafe(fork)));
    });
    jobs()
        .send(job)
        .expect("the spawner thread lives as long as the process");
    match outcome
        .recv()
        .expect("the spawner thread answers every job")
    {
        Ok(value) => value,
        Err(panic) => resume_unwind(panic),
    }
}

/// The spawner thread's queue, started on first use.
fn jobs() -> &'static mpsc::Sender<Job> {
    static JOBS: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    JOBS.get_or_init(|| {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("toolbroker-spawner".into())
            .spawn(move || queue.into_iter().for_each(|job| job()))
            .expect("a thread to start servers from");
        jobs
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fork_runs_on_the_same_long_lived_thread() {
        let name = || std::thread::current().name().map(str::to_owned);
        let first = std::thread::spawn(move || on_spawner_thread(name))
            .join()
            .unwrap();
        let second = on_spawner_thread(name);
        assert_eq!(first.as_deref(), Some("toolbroker-spawner"));
        assert_eq!(first, second);
    }

    #[test]
    fn a_panic_reaches_the_caller_and_the_thread_goes_on() {
        let panicked = catch_unwind(|| on_spawner_thread(|| panic!("no fork")));
        assert!(panicked.is_err());
        assert_eq!(on_spawner_thread(|| 7), 7);
    }
}
