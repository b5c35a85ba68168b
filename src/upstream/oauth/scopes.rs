//! Asking for more scope when a server says `insufficient_scope`, within a limit: the scope asked
//! for grows by what the server names, at most [`MAX_STEP_UPS`] times for a server's grant, and
//! never for scope the token already has (the server would refuse again).

use std::sync::{Mutex, PoisonError};

use crate::domain::outcome::NoStepUp;

/// How many times one grant asks for more scope.
pub const MAX_STEP_UPS: u32 = 3;

/// The scope tokens of a space-separated `scope`.
pub fn split(scope: Option<&str>) -> Vec<String> {
    scope
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// `base` and then what `more` adds, each once.
pub fn union(base: &[String], more: &[String]) -> Vec<String> {
    let mut all = base.to_vec();
    for scope in more {
        if !all.contains(scope) {
            all.push(scope.clone());
        }
    }
    all
}

/// The scope a grant asks for beyond its configured scope, grown by step-ups.
#[derive(Default)]
pub struct ScopeLadder {
    state: Mutex<Rungs>,
}

#[derive(Default)]
struct Rungs {
    extra: Vec<String>,
    climbs: u32,
}

impl ScopeLadder {
    /// Adds the scope `required` (space-separated) that a token holding `granted` lacked; why
    /// not when asking again cannot help.
    pub fn climb(&self, required: Option<&str>, granted: &[String]) -> Result<(), NoStepUp> {
        let required = split(required);
        if required.is_empty() {
            return Err(NoStepUp::Unnamed);
        }
        let mut rungs = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if required.iter().all(|scope| granted.contains(scope)) {
            return Err(NoStepUp::AlreadyGranted);
        }
        if rungs.climbs >= MAX_STEP_UPS {
            return Err(NoStepUp::Limit(MAX_STEP_UPS));
        }
        rungs.climbs += 1;
        rungs.extra = union(&rungs.extra, &required);
        Ok(())
    }

    /// `base` with the scope step-ups added.
    pub fn on(&self, base: &[String]) -> Vec<String> {
        let rungs = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        union(base, &rungs.extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_adds_what_is_missing_and_stops_at_its_limit() {
        let ladder = ScopeLadder::default();
        let base = vec!["read".to_owned()];
        assert_eq!(ladder.climb(None, &base), Err(NoStepUp::Unnamed));
        assert_eq!(
            ladder.climb(Some("read"), &base),
            Err(NoStepUp::AlreadyGranted)
        );
        assert_eq!(ladder.climb(Some("read write"), &base), Ok(()));
        assert_eq!(ladder.on(&base), ["read", "write"]);
        assert_eq!(ladder.climb(Some("admin"), &base), Ok(()));
        assert_eq!(ladder.climb(Some("more"), &base), Ok(()));
        assert_eq!(
            ladder.climb(Some("yet-more"), &base),
            Err(NoStepUp::Limit(MAX_STEP_UPS))
        );
        assert_eq!(ladder.on(&[]), ["read", "write", "admin", "more"]);
    }
}
