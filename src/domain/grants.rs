//! Which tools a caller may see and call: every tool, or those matching its patterns (`*` and
//! `?` over exposed names) — a static token's `tools`, or the union of what a JWT's claim
//! values are granted. Pure.

use std::sync::Arc;

use wildmatch::WildMatch;

/// The tools a caller may see and call.
#[derive(Debug, Clone)]
pub enum Access {
    /// Every tool.
    All,
    /// Only exposed names matching one of these (none: no tool at all).
    Only(Arc<[WildMatch]>),
}

impl Access {
    /// A static token's access: its `tools` patterns, or every tool when it lists none.
    pub fn of_token(patterns: &[String]) -> Self {
        if patterns.is_empty() {
            Access::All
        } else {
            Self::only(patterns.iter())
        }
    }

    /// A JWT's access: with no `grants`, every tool; with `grants`, the union of the patterns
    /// its claim values are granted (nothing when none is).
    pub fn of_grants(grants: Option<&[(String, Vec<String>)]>, values: &[String]) -> Self {
        let Some(grants) = grants else {
            return Access::All;
        };
        let granted = grants
            .iter()
            .filter(|(value, _)| values.contains(value))
            .flat_map(|(_, patterns)| patterns);
        Self::only(granted)
    }

    fn only<'a>(patterns: impl Iterator<Item = &'a String>) -> Self {
        let patterns: Vec<WildMatch> = patterns.map(|p| WildMatch::new(p)).collect();
        Access::Only(patterns.into())
    }

    /// Whether the tool exposed as `name` may be seen and called.
    pub fn may_use(&self, name: &str) -> bool {
        match self {
            Access::All => true,
            Access::Only(patterns) => patterns.iter().any(|p| p.matches(name)),
        }
    }

    /// Whether every tool may be.
    pub fn sees_all(&self) -> bool {
        matches!(self, Access::All)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants() -> Vec<(String, Vec<String>)> {
        vec![
            ("tools:fs".into(), vec!["fs_*".into()]),
            ("tools:echo".into(), vec!["echo".into(), "ech?2".into()]),
        ]
    }

    #[test]
    fn static_tokens_see_their_patterns_or_everything() {
        assert!(Access::of_token(&[]).sees_all());
        let reader = Access::of_token(&["fs_read_*".into()]);
        assert!(reader.may_use("fs_read_file") && !reader.may_use("fs_write_file"));
    }

    #[test]
    fn jwt_claim_values_grant_the_union_of_their_patterns() {
        let grants = grants();
        let both = Access::of_grants(Some(&grants), &["tools:fs".into(), "tools:echo".into()]);
        assert!(both.may_use("fs_read") && both.may_use("echo") && both.may_use("echo2"));
        assert!(!both.may_use("shell"));
        let fs = Access::of_grants(Some(&grants), &["tools:fs".into(), "other".into()]);
        assert!(fs.may_use("fs_read") && !fs.may_use("echo"));
        let none = Access::of_grants(Some(&grants), &[]);
        assert!(
            !none.may_use("echo") && !none.sees_all(),
            "granted nothing, sees nothing"
        );
        assert!(
            Access::of_grants(None, &[]).sees_all(),
            "no grants: every tool"
        );
    }
}
