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
    fn first_kind(&self) -> CallerKind {
        CallerKind::Jwt
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
fn caller_values_are_filled_in_and_rendered_injectively_for_processes() {
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
            "blue_green~1987874e14c798a2",
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
fn a_caller_cannot_leave_its_folder_nor_pass_an_option() {
    for id in ["../../etc", "..", ".", "a b/c\\d", "-rf", "--serial"] {
        let rendered = template("/data/${caller.id}")
            .render(&caller(id), Destination::Process)
            .unwrap();
        let name = rendered.strip_prefix("/data/").unwrap();
        assert!(!name.contains('/'), "{id}: {rendered}");
        assert!(!name.starts_with(['.', '-']), "{id}: {rendered}");
    }
    let mut rogue = caller("alice");
    rogue.headers = vec![("x-extra", "--serial")];
    let arg = template("${caller.header.x-extra}")
        .render(&rogue, Destination::Process)
        .unwrap();
    assert!(arg.starts_with("serial~"), "{arg}");
    for (id, want) in [("bob@example.com", "bob@example.com"), ("a_b", "a_b")] {
        let rendered = template("/data/${caller.id}")
            .render(&caller(id), Destination::Process)
            .unwrap();
        assert_eq!(rendered, format!("/data/{want}"), "{id}");
    }
}

#[test]
fn callers_differing_in_kind_or_id_get_different_files() {
    let mut token_alice = caller("alice");
    token_alice.key.kind = CallerKind::Token;
    let file = template("/data/${caller.id}.json");
    let render = |c: &Caller| file.render(c, Destination::Process).unwrap();
    let all = [
        render(&caller("alice")),
        render(&token_alice),
        render(&caller("李雷")),
        render(&caller("王芳")),
        render(&caller("a/b")),
        render(&caller("a_b")),
    ];
    let distinct: std::collections::HashSet<_> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "{all:?}");
    assert_eq!(all[0], "/data/alice.json");
    assert!(all[1].starts_with("/data/token.alice~"), "{}", all[1]);
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
