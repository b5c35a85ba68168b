use super::*;
use crate::domain::expand::{ExpandError, expand, expand_template};

struct Caller {
    key: CallerKey,
    token: Option<&'static str>,
    headers: Vec<(&'static str, &'static str)>,
}

impl CallerValues for Caller {
    fn key(&self) -> &CallerKey {
        &self.key
    }
    fn token(&self) -> Option<&str> {
        self.token
    }
    fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        let (_, value) = self.headers.iter().find(|(n, _)| *n == name)?;
        Some(Cow::Borrowed(value))
    }
    fn claim(&self, name: &str) -> Option<Cow<'_, str>> {
        (name == "org").then_some(Cow::Borrowed("acme"))
    }
}

fn caller(id: &str) -> Caller {
    Caller {
        key: CallerKey {
            kind: CallerKind::Jwt,
            id: id.into(),
        },
        token: Some("tok.en-1"),
        headers: vec![("x-tenant", "blue/green")],
    }
}

fn template(text: &str) -> Template {
    let env = |name: &str| (name == "DIR").then(|| "/data".to_owned());
    expand_template(text, &env).unwrap()
}

#[test]
fn caller_values_are_filled_in_and_made_path_safe_for_processes() {
    let alice = caller("alice");
    let cases = [
        (
            "${DIR}/${caller.id}.json",
            Destination::Process,
            "/data/alice.json",
        ),
        (
            "${caller.header.X-Tenant}",
            Destination::Process,
            "blue_green",
        ),
        (
            "${caller.header.x-tenant}",
            Destination::Header,
            "blue/green",
        ),
        (
            "Bearer ${caller.token}",
            Destination::Header,
            "Bearer tok.en-1",
        ),
        (
            "${caller.claim.org}-$${caller.id}",
            Destination::Process,
            "acme-${caller.id}",
        ),
    ];
    for (text, to, want) in cases {
        assert_eq!(template(text).render(&alice, to).unwrap(), want, "{text}");
    }
}

#[test]
fn a_caller_cannot_leave_its_folder() {
    for (id, want) in [
        ("../../etc", ".._.._etc"),
        ("..", "__"),
        (".", "_"),
        ("a b/c\\d", "a_b_c_d"),
        ("bob@example.com", "bob@example.com"),
    ] {
        let rendered = template("/data/${caller.id}")
            .render(&caller(id), Destination::Process)
            .unwrap();
        assert_eq!(rendered, format!("/data/{want}"), "{id}");
    }
}

#[test]
fn a_missing_value_is_named() {
    let mut anonymous = caller("x");
    anonymous.token = None;
    let missing = template("${caller.token}")
        .render(&anonymous, Destination::Header)
        .unwrap_err();
    assert_eq!(missing, MissingValue(CallerRef::Token));
    let missing = template("${caller.header.x-org}")
        .render(&anonymous, Destination::Header)
        .unwrap_err();
    assert!(
        missing.to_string().contains("${caller.header.x-org}"),
        "{missing}"
    );
}

#[test]
fn caller_values_are_refused_where_there_is_no_caller() {
    let none = |_: &str| None;
    assert_eq!(
        expand("${caller.id}", &none),
        Err(ExpandError::CallerValue(CallerRef::Id))
    );
    let bad = expand_template("${caller.name}", &none).unwrap_err();
    assert!(bad.to_string().contains("unknown caller value"), "{bad}");
    assert!(expand_template("${caller.header.}", &none).is_err());
    assert!(template("plain").is_fixed());
    assert!(!template("${caller.id}").is_fixed());
}

#[test]
fn templates_never_show_their_text() {
    let shown = format!("{:?}", template("Bearer s3cret-${caller.id}"));
    assert!(!shown.contains("s3cret"), "{shown}");
}
