//! Views: named subsets of the catalog, each a set of exposed-name patterns, asked for by name
//! on `ListTools`, `Watch`, `SearchTools` and the MCP face's `/mcp/<view>`. Pure.

use std::collections::BTreeMap;

use super::{
    grants::{Access, Patterns},
    request_error::RequestError,
};

/// The configured views, by name: as written, and compiled.
#[derive(Debug, Clone, Default)]
pub struct Views {
    written: BTreeMap<String, Vec<String>>,
    compiled: BTreeMap<String, Patterns>,
}

impl PartialEq for Views {
    fn eq(&self, other: &Self) -> bool {
        self.written == other.written
    }
}

impl Views {
    /// The `views` section of a configuration.
    pub fn new(views: &BTreeMap<String, Vec<String>>) -> Self {
        Self {
            written: views.clone(),
            compiled: views
                .iter()
                .map(|(name, patterns)| (name.clone(), Patterns::only(patterns.iter())))
                .collect(),
        }
    }

    /// The patterns of view `name` as written, if there is such a view.
    pub fn written(&self, name: &str) -> Option<&[String]> {
        self.written.get(name).map(Vec::as_slice)
    }

    /// The view called `name`; NOT_FOUND naming the views there are when none is.
    pub fn get(&self, name: &str) -> Result<&Patterns, RequestError> {
        self.compiled.get(name).ok_or_else(|| self.unknown(name))
    }

    /// The refusal of a view that does not exist, naming the views there are.
    pub fn unknown(&self, name: &str) -> RequestError {
        RequestError::UnknownView {
            name: name.to_owned(),
            known: if self.compiled.is_empty() {
                "the broker's configuration defines no views".to_owned()
            } else {
                let names: Vec<&str> = self.compiled.keys().map(String::as_str).collect();
                format!("the views are: {}", names.join(", "))
            },
        }
    }

    /// A call to `tool` made through the view a request names (`view`, empty for none): the
    /// same refusal for a tool outside the view as for an unknown tool, so a client of a view
    /// learns nothing of the tools beyond it.
    pub fn admit_call(&self, view: &str, tool: &str) -> Result<(), RequestError> {
        match self.asked(view)? {
            Some(patterns) if !patterns.matches(tool) => Err(RequestError::UnknownTool {
                name: tool.to_owned(),
            }),
            _ => Ok(()),
        }
    }

    /// What `access` sees through the view a request names (`view`, empty for none): its
    /// tools narrowed to the view's. The one rule both faces list by (a call is admitted by
    /// [`Views::admit_call`]); an unknown view is NOT_FOUND naming the views there are.
    pub fn narrow(&self, access: &Access, view: &str) -> Result<Access, RequestError> {
        Ok(match self.asked(view)? {
            Some(patterns) => access.clone().within(patterns.clone()),
            None => access.clone(),
        })
    }

    /// The view asked for by a request field: none when the field is empty.
    pub fn asked(&self, name: &str) -> Result<Option<&Patterns>, RequestError> {
        if name.is_empty() {
            Ok(None)
        } else {
            self.get(name).map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_narrows_what_a_caller_sees_and_an_unknown_one_is_named() {
        let views = Views::new(&BTreeMap::from([(
            "support".to_owned(),
            vec!["jira_*".to_owned()],
        )]));
        let grants = [(
            "team".to_owned(),
            vec!["jira_create".to_owned(), "k8s_*".to_owned()],
        )];
        let granted = Access::of_grants(Some(&grants), &["team".to_owned()]);
        let all = views.narrow(&Access::ALL, "support").unwrap();
        assert!(all.may_use("jira_create") && !all.may_use("k8s_get"));
        let narrowed = views.narrow(&granted, "support").unwrap();
        assert!(narrowed.may_use("jira_create"));
        assert!(
            !narrowed.may_use("jira_delete"),
            "the caller's grants still apply"
        );
        assert!(!narrowed.may_use("k8s_get"), "the view applies");
        assert!(views.narrow(&granted, "").unwrap().may_use("k8s_get"));
        let unknown = views.narrow(&Access::ALL, "sales").unwrap_err().to_string();
        assert!(unknown.contains("support"), "{unknown}");
    }

    #[test]
    fn a_view_is_found_by_name_and_an_unknown_one_lists_the_others() {
        let views = Views::new(&BTreeMap::from([
            ("support".to_owned(), vec!["jira_*".to_owned()]),
            ("ops".to_owned(), vec!["k8s_get?".to_owned()]),
        ]));
        let support = views.get("support").unwrap();
        assert!(support.matches("jira_create") && !support.matches("k8s_get1"));
        assert!(views.asked("").unwrap().is_none());
        assert!(views.admit_call("", "anything").is_ok());
        assert!(views.admit_call("support", "jira_create").is_ok());
        let outside = views.admit_call("support", "k8s_get1").unwrap_err();
        assert!(matches!(outside, RequestError::UnknownTool { name } if name == "k8s_get1"));
        let unknown = views.admit_call("sales", "jira_create").unwrap_err();
        assert!(matches!(unknown, RequestError::UnknownView { .. }));
        let unknown = views.get("sales").unwrap_err().to_string();
        assert!(
            unknown.contains("\"sales\"") && unknown.contains("ops, support"),
            "{unknown}"
        );
        let none = Views::default().get("x").unwrap_err().to_string();
        assert!(none.contains("defines no views"), "{none}");
    }
}
