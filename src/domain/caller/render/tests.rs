use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

fn key(kind: CallerKind, id: &str) -> CallerKey {
    CallerKey {
        kind,
        id: id.into(),
    }
}

/// The rendered id's readable part (before `~`), and whether it has a digest.
fn split(rendered: &str) -> (&str, bool) {
    match rendered.split_once('~') {
        Some((readable, digest)) => {
            assert_eq!(digest.len(), DIGEST_HEX, "{rendered}");
            assert!(digest.chars().all(|c| c.is_ascii_hexdigit()), "{rendered}");
            (readable, true)
        }
        None => (rendered, false),
    }
}

#[test]
fn plain_ids_of_the_first_kind_stay_as_they_are_and_the_rest_get_a_digest() {
    use CallerKind::{Anonymous, Certificate, Jwt, Token};
    let cases = [
        (Token, "alice", Token, "alice", false),
        (Token, "bob@example.com", Token, "bob@example.com", false),
        (Jwt, "alice", Token, "jwt.alice", true),
        (Jwt, "alice", Jwt, "alice", false),
        (Token, "李雷", Token, "Li_Lei", true),
        (Token, "王芳", Token, "Wang_Fang", true),
        (Token, "a/b", Token, "a_b", true),
        (Token, "../../etc", Token, "etc", true),
        (Token, "..", Token, "_", true),
        (Token, "-rf", Token, "rf", true),
        (Token, ".hidden", Token, "hidden", true),
        (Token, "", Token, "_", true),
        (
            Certificate,
            "spiffe://example.org/ns/prod/sa/billing",
            Certificate,
            "spiffe_example.org_ns_prod_sa_billing",
            true,
        ),
        (Anonymous, "discovery", Token, "anonymous.discovery", true),
        (Anonymous, "anonymous", Anonymous, "anonymous", false),
    ];
    for (kind, id, first, want, digested) in cases {
        let rendered = rendered_id(&key(kind, id), first);
        assert_eq!(split(&rendered), (want, digested), "{kind:?} {id:?}");
    }
    let long = "a".repeat(MAX_PLAIN + 1);
    let rendered = rendered_id(&key(Token, &long), Token);
    assert_eq!(split(&rendered), (&long[..MAX_READABLE], true));
}

#[test]
fn values_are_plain_or_digested_and_never_an_option() {
    for (value, want, digested) in [
        ("blue", "blue", false),
        ("blue/green", "blue_green", true),
        ("--serial", "serial", true),
        ("-", "_", true),
    ] {
        let rendered = rendered_value(value);
        assert_eq!(split(&rendered), (want, digested), "{value:?}");
    }
}

#[test]
fn the_digest_is_of_the_exact_kind_and_value() {
    // Fixed, so that an operator can compute a folder's name ahead:
    // printf 'token\0a/b' | sha256sum | cut -c1-16
    assert_eq!(
        rendered_id(&key(CallerKind::Token, "a/b"), CallerKind::Token),
        format!("a_b~{}", digest("token", "a/b"))
    );
    assert_eq!(digest("token", "a/b"), "2de436aa16bb3713");
}

/// Ids drawn from few characters, so that readable parts collide often.
fn id() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[ab/_.\\-~李王 ]{0,5}").unwrap()
}

fn kind() -> impl Strategy<Value = CallerKind> {
    prop_oneof![
        Just(CallerKind::Anonymous),
        Just(CallerKind::Token),
        Just(CallerKind::Jwt),
        Just(CallerKind::Certificate),
    ]
}

/// Every rendered text is safe where it lands: no option, no hidden or parent folder, no path.
fn assert_safe(rendered: &str) {
    assert!(!rendered.is_empty());
    assert!(!rendered.starts_with(['-', '.', '~']), "{rendered:?}");
    assert!(
        rendered
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._@-~".contains(c)),
        "{rendered:?}"
    );
}

proptest! {
    #[test]
    fn different_callers_never_render_the_same(
        callers in proptest::collection::vec((kind(), id()), 1..40),
        first in kind(),
    ) {
        let mut seen: HashMap<String, CallerKey> = HashMap::new();
        for (kind, id) in callers {
            let caller = key(kind, &id);
            let rendered = rendered_id(&caller, first);
            assert_safe(&rendered);
            if let Some(other) = seen.insert(rendered.clone(), caller.clone()) {
                prop_assert_eq!(&other, &caller, "{} rendered as {}", other, rendered);
            }
        }
    }

    #[test]
    fn different_values_never_render_the_same(values in proptest::collection::vec(id(), 1..40)) {
        let mut seen: HashMap<String, String> = HashMap::new();
        for value in values {
            let rendered = rendered_value(&value);
            assert_safe(&rendered);
            if let Some(other) = seen.insert(rendered.clone(), value.clone()) {
                prop_assert_eq!(&other, &value, "both rendered as {}", rendered);
            }
        }
    }
}
