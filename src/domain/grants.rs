//! What a caller may see and use: every tool, or those matching its patterns (`*` and `?`
//! over exposed names) — a static token's `tools`, or the union of what a JWT's claim values
//! are granted — and, for a restricted caller, the prompts and the servers' resources its
//! token names (none by default). Pure.

use std::sync::Arc;

use wildmatch::WildMatch;

/// Names matched by patterns: all of them, or those matching one pattern.
#[derive(Debug, Clone)]
pub enum Patterns {
    /// Every name.
    All,
    /// Only names matching one of these (none: nothing at all).
    Only(Arc<[WildMatch]>),
}

impl Patterns {
    /// Only names matching one of `patterns`.
    pub fn only<'a>(patterns: impl Iterator<Item = &'a String>) -> Self {
        let patterns: Vec<WildMatch> = patterns.map(|p| WildMatch::new(p)).collect();
        Patterns::Only(patterns.into())
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Patterns::All => true,
            Patterns::Only(patterns) => patterns.iter().any(|p| p.matches(name)),
        }
    }
}

/// The tools, prompts and resources a caller may see and use.
#[derive(Debug, Clone)]
pub struct Access {
    /// Exposed tool names.
    tools: Patterns,
    /// The views it is bound to (a token's, a request's): tools outside any of them are
    /// neither seen nor called.
    views: Vec<Patterns>,
    /// Exposed prompt names.
    prompts: Patterns,
    /// Names of the servers whose resources it may list and read.
    resources: Patterns,
}

impl Access {
    /// Everything.
    pub const ALL: Access = Access {
        tools: Patterns::All,
        views: Vec::new(),
        prompts: Patterns::All,
        resources: Patterns::All,
    };

    /// A static token's access: everything when it lists no `tools` and is bound to no view;
    /// otherwise its `tools` (every tool when none is listed), within its `view`, and its
    /// `prompts` and `resources` patterns (the last two default to nothing: a token restricted
    /// by a view is restricted in prompts and resources as one restricted by `tools` is).
    pub fn of_token(
        tools: &[String],
        prompts: &[String],
        resources: &[String],
        view: Option<Patterns>,
    ) -> Self {
        if tools.is_empty() && view.is_none() {
            return Self::ALL;
        }
        Access {
            tools: if tools.is_empty() {
                Patterns::All
            } else {
                Patterns::only(tools.iter())
            },
            views: view.into_iter().collect(),
            prompts: Patterns::only(prompts.iter()),
            resources: Patterns::only(resources.iter()),
        }
    }

    /// A JWT's access: with no `grants`, everything; with `grants`, the union of the tool
    /// patterns its claim values are granted (nothing when none is), and no prompts or
    /// resources (grants name tools only).
    pub fn of_grants(grants: Option<&[(String, Vec<String>)]>, values: &[String]) -> Self {
        let Some(grants) = grants else {
            return Self::ALL;
        };
        let granted = grants
            .iter()
            .filter(|(value, _)| values.contains(value))
            .flat_map(|(_, patterns)| patterns);
        Access {
            tools: Patterns::only(granted),
            views: Vec::new(),
            prompts: Patterns::only(std::iter::empty()),
            resources: Patterns::only(std::iter::empty()),
        }
    }

    /// This access bound to a view as well: its tool patterns apply inside the view's.
    pub fn within(mut self, view: Patterns) -> Self {
        self.views.push(view);
        self
    }

    /// Whether the tool exposed as `name` may be seen and called.
    pub fn may_use(&self, name: &str) -> bool {
        self.tools.matches(name) && self.views.iter().all(|view| view.matches(name))
    }

    /// Whether every tool may be.
    pub fn sees_all(&self) -> bool {
        matches!(self.tools, Patterns::All) && self.views.is_empty()
    }

    /// Whether anything is kept from it: a tool, a prompt or a server's resources.
    pub fn restricts(&self) -> bool {
        !(self.sees_all()
            && matches!(self.prompts, Patterns::All)
            && matches!(self.resources, Patterns::All))
    }

    /// Whether the prompt exposed as `name` may be seen and got.
    pub fn may_prompt(&self, name: &str) -> bool {
        self.prompts.matches(name)
    }

    /// Whether `server`'s resources may be listed and read.
    pub fn may_read(&self, server: &str) -> bool {
        self.resources.matches(server)
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
    fn a_view_bounds_what_a_token_sees() {
        let support = Patterns::only(["jira_*".to_owned(), "fs_read_*".to_owned()].iter());
        let bound = Access::of_token(&[], &[], &[], Some(support.clone()));
        assert!(!bound.sees_all());
        assert!(bound.may_use("jira_create") && !bound.may_use("fs_write_file"));
        assert!(
            !bound.may_prompt("jira_prompt"),
            "a view-bound token: prompts by its patterns"
        );
        assert!(
            !bound.may_read("jira"),
            "and resources by its patterns, none by default"
        );
        let granted = Access::of_token(
            &[],
            &["jira_*".into()],
            &["jira".into()],
            Some(support.clone()),
        );
        assert!(granted.may_prompt("jira_prompt") && granted.may_read("jira"));
        assert!(!granted.may_prompt("fs_prompt") && !granted.may_read("fs"));
        let narrower = Access::of_token(&["fs_*".into()], &[], &[], Some(support));
        assert!(narrower.may_use("fs_read_file") && !narrower.may_use("jira_create"));
        let twice = narrower.within(Patterns::only(["fs_read_dir".to_owned()].iter()));
        assert!(twice.may_use("fs_read_dir") && !twice.may_use("fs_read_file"));
    }

    #[test]
    fn static_tokens_see_their_patterns_or_everything() {
        assert!(Access::of_token(&[], &[], &[], None).sees_all());
        let reader = Access::of_token(&["fs_read_*".into()], &[], &["fs".into()], None);
        assert!(reader.may_use("fs_read_file") && !reader.may_use("fs_write_file"));
        assert!(reader.may_read("fs") && !reader.may_read("memory"));
        assert!(!reader.may_prompt("fs_prompt"), "prompts default to none");
        let all = Access::of_token(&[], &[], &[], None);
        assert!(all.may_prompt("any") && all.may_read("any"));
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
        assert!(!fs.may_prompt("greet") && !fs.may_read("fs"));
        assert!(
            Access::of_grants(None, &[]).sees_all(),
            "no grants: every tool"
        );
    }
}
