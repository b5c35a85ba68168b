//! The `tasks` section: its defaults, its values, and each mistake named by its field.

use std::time::Duration;

use super::{errors::assert_errors, ok};
use crate::domain::config::Tasks;

#[test]
fn tasks_default_to_an_hour_a_hundred_and_not_always() {
    assert_eq!(ok("servers: []").tasks, Tasks::default());
    assert_eq!(
        Tasks::default(),
        Tasks {
            ttl: Duration::from_secs(3600),
            max_per_caller: 100,
            always: false,
        }
    );
    let set = ok("tasks: {ttl: 10m, max_per_caller: 3, always: true}").tasks;
    assert_eq!(
        set,
        Tasks {
            ttl: Duration::from_secs(600),
            max_per_caller: 3,
            always: true,
        }
    );
}

#[test]
fn each_tasks_mistake_names_its_field() {
    assert_errors("tasks: {ttl: 0s}", &[("tasks.ttl", "greater than zero")]);
    assert_errors("tasks: {ttl: 30d}", &[("tasks.ttl", "at most")]);
    assert_errors(
        "tasks: {max_per_caller: 0}",
        &[("tasks.max_per_caller", "")],
    );
    assert_errors(
        "tasks: {max_per_caller: 20000}",
        &[("tasks.max_per_caller", "")],
    );
    assert_errors("tasks: {forever: true}", &[("tasks.forever", "")]);
    assert_errors("tasks: 3", &[("tasks", "")]);
}
