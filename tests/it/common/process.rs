//! What a process (the broker) uses, read from /proc: for tests that bound memory or CPU.

use std::time::Duration;

/// The resident memory of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS in kB")
}

/// The CPU time (user and system) process `pid` has used so far.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // utime and stime, the 14th and 15th fields, follow the name in parentheses.
    let ticks: u64 = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse::<u64>().unwrap())
        .sum();
    // In USER_HZ, which Linux fixes at 100 for user space.
    Duration::from_millis(ticks * 10)
}
