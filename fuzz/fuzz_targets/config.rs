//! `domain::config::parse` on any UTF-8 text, with an environment that sets some variables
//! and not others: it must answer `Ok` or a list of errors, never panic or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolbroker::domain::config;

/// Variables whose names start with `A`–`M` are set; the rest are not. Some values hold
/// `$` and `${`, which must come out as they are, not be expanded again.
fn lookup(name: &str) -> Option<String> {
    match name.chars().next()? {
        'A'..='L' => Some(format!("value-of-{name}")),
        'M' => Some("$M ${NOT_AGAIN} $$".to_owned()),
        _ => None,
    }
}

fuzz_target!(|text: &str| {
    match config::parse(text, &lookup) {
        // Debug printing walks the whole config (and must not show secrets, which a fuzzer
        // cannot judge); it should never panic either.
        Ok(config) => drop(format!("{config:?}")),
        Err(errors) => {
            assert!(!errors.0.is_empty(), "an Err with no errors for {text:?}");
            drop(errors.to_string());
        }
    }
});
