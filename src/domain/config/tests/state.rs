//! The `state` section: absent by default, its defaults, the password kept out of sight, and
//! each mistake named by its field.

use super::{errors::assert_errors, ok};
use crate::domain::config::{OnUnavailable, kept_note};

#[test]
fn state_is_absent_by_default_and_read_with_its_defaults() {
    assert!(ok("servers: []").state.is_none());
    let state = ok("state: {redis: 'redis://:pw@redis.local:6380/2'}")
        .state
        .unwrap();
    assert_eq!(state.redis.port(), Some(6380));
    assert_eq!(state.key_prefix, "toolbroker:");
    assert_eq!(state.on_unavailable, OnUnavailable::Allow);
    assert!(state.password.is_none());
    // The password in the URL is used, but never shown.
    assert_eq!(state.shown(), "redis://redis.local:6380/2");
    assert!(!format!("{state:?}").contains("pw"), "{state:?}");

    let state = ok(
        "state: {redis: 'rediss://redis:6379/0', password_env: TOKEN, key_prefix: 'team-a:', \
         on_unavailable: refuse}",
    )
    .state
    .unwrap();
    assert_eq!(state.password.unwrap().expose(), "tok-456-secret");
    assert_eq!(state.key_prefix, "team-a:");
    assert_eq!(state.on_unavailable, OnUnavailable::Refuse);
}

#[test]
fn each_state_mistake_names_its_field() {
    assert_errors("state: {}", &[("state.redis", "required")]);
    assert_errors(
        "state: {redis: 'http://redis:6379'}",
        &[("state.redis", "redis://")],
    );
    assert_errors(
        "state: {redis: 'not a url'}",
        &[("state.redis", "not a URL")],
    );
    assert_errors(
        "state: {redis: 'redis://redis:6379/zero'}",
        &[("state.redis", "not a number")],
    );
    assert_errors(
        "state: {redis: 'redis://r', on_unavailable: maybe}",
        &[("state.on_unavailable", "allow")],
    );
    assert_errors(
        "state: {redis: 'redis://r', password_env: NOT_SET}",
        &[("state.password_env", "NOT_SET")],
    );
    assert_errors(
        "state: {redis: 'redis://r', key_prefix: ''}",
        &[("state.key_prefix", "non-empty")],
    );
    assert_errors("state: {redis: 'redis://r', db: 1}", &[("state.db", "")]);
}

#[test]
fn list_servers_says_where_rates_and_tokens_are_kept() {
    let config = ok("state: {redis: 'redis://:pw@r:6379/0'}\n\
         servers:\n  - {name: rated, command: x, rate: 5/s}\n  - {name: plain, command: x}\n");
    let place = config.state.as_ref().unwrap().place();
    let note =
        |i: usize, caller_rate: bool| kept_note(&config.servers[i], caller_rate, Some(&place));
    let rated = note(0, false).unwrap();
    assert!(
        rated.starts_with("rates kept in Redis (redis://r:6379/0"),
        "{rated}"
    );
    assert!(!rated.contains("pw"), "{rated}");
    assert_eq!(note(1, false), None, "no rate, no token: nothing to say");
    assert!(note(1, true).unwrap().starts_with("rates kept in Redis"));
    let alone = kept_note(&config.servers[0], false, None).unwrap();
    assert_eq!(alone, "rates kept in this replica's memory");
}
