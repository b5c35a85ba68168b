//! One caller's step-ups never reach another's.

use super::*;
use crate::domain::{
    caller::{CallerKind, SecretText},
    outcome::NoStepUp,
};

fn tokens() -> Arc<CrossAppTokens> {
    let spec = CrossApp {
        client_id: "toolbroker".into(),
        client_secret: SecretText::from("secret".to_owned()),
        idp_token_endpoint: "https://idp.example/token".into(),
        idp_client_id: "broker-at-idp".into(),
        idp_client_secret: None,
        idp_issuer: None,
    };
    let url = Url::parse("https://mcp.example/mcp").unwrap();
    CrossAppTokens::new(
        ServerName::parse("remote").unwrap(),
        url,
        spec,
        vec!["read".into()],
    )
}

fn caller(id: &str) -> CallerKey {
    CallerKey {
        kind: CallerKind::Jwt,
        id: id.into(),
    }
}

#[test]
fn one_callers_step_ups_neither_widen_nor_use_up_anothers() {
    let app = tokens();
    let (mallory, alice) = (caller("mallory"), caller("alice"));
    let granted = ["read".to_owned()];
    for scope in ["admin", "delete", "billing"] {
        assert_eq!(app.ladder(&mallory).climb(Some(scope), &granted), Ok(()));
    }
    assert_eq!(
        app.ladder(&mallory).climb(Some("more"), &granted),
        Err(NoStepUp::Limit(
            crate::upstream::oauth::scopes::MAX_STEP_UPS
        ))
    );
    assert_eq!(
        app.ladder(&mallory).on(&app.scopes),
        ["read", "admin", "delete", "billing"]
    );
    // Alice asks for her configured scope only, and may still step up herself.
    assert_eq!(app.ladder(&alice).on(&app.scopes), ["read"]);
    assert_eq!(app.ladder(&alice).climb(Some("write"), &granted), Ok(()));
    assert_eq!(app.ladder(&alice).on(&app.scopes), ["read", "write"]);
}
