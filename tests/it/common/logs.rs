//! The broker's log lines (JSON, from its stderr) as they come, and waits on them. The stderr of
//! each stdio server reaches this log too, one line at a time, with target `toolbroker::stderr`.

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    sync::watch,
};

use super::{WAIT, broker::Broker};

/// Reads the broker's JSON log lines into a watch channel as they come.
pub(super) fn collect_logs(stderr: tokio::process::ChildStderr) -> watch::Receiver<Vec<Value>> {
    let (tx, rx) = watch::channel(Vec::new());
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
            tx.send_modify(|logs| logs.push(value));
        }
    });
    rx
}

/// Matches a line a stdio server printed on its stderr containing `text` (e.g. the demo's
/// `sleep started`).
pub fn stderr_says(text: &str) -> impl Fn(&Value) -> bool + '_ {
    move |line| {
        line["target"] == "toolbroker::stderr"
            && line["message"].as_str().is_some_and(|m| m.contains(text))
    }
}

impl Broker {
    /// Every log line so far, as JSON objects.
    pub fn logs(&self) -> Vec<Value> {
        self.logs.borrow().clone()
    }

    /// Waits until a log line satisfies `matches`, and returns it.
    pub async fn wait_for_log(&self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let mut logs = self.logs.clone();
        let found = tokio::time::timeout(WAIT, logs.wait_for(|lines| lines.iter().any(&matches)))
            .await
            .unwrap_or_else(|_| {
                panic!("no log line {what} within {WAIT:?}; logs:\n{}", self.dump())
            })
            .expect("log collector alive");
        found
            .iter()
            .find(|l| matches(l))
            .cloned()
            .expect("just matched")
    }

    /// Waits until a log line's message contains `text`.
    pub async fn wait_for_message(&self, what: &str, text: &str) -> Value {
        self.wait_for_log(what, |line| {
            line["message"].as_str().is_some_and(|m| m.contains(text))
        })
        .await
    }

    /// Waits until at least `count` log lines satisfy `matches`.
    pub async fn wait_for_logs(&self, what: &str, count: usize, matches: impl Fn(&Value) -> bool) {
        let mut logs = self.logs.clone();
        let enough = |lines: &Vec<Value>| lines.iter().filter(|l| matches(l)).count() >= count;
        tokio::time::timeout(WAIT, logs.wait_for(enough))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "not {count} log lines {what} within {WAIT:?}; logs:\n{}",
                    self.dump()
                )
            })
            .expect("log collector alive");
    }

    /// The log as text, for failure messages.
    pub fn dump(&self) -> String {
        self.logs()
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}
