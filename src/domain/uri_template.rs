//! Whether a URI could have come from an RFC 6570 URI template: how a read of a templated
//! resource finds the server whose template it is. Pure.

/// Whether `uri` is an expansion of `template`: its literal parts in order, each expression
/// standing for text its operator could expand to (a simple `{var}` never spans `/`, `?`
/// or `#`, as those would have been percent-encoded).
pub fn matches(template: &str, uri: &str) -> bool {
    match parse(template) {
        Some(parts) => match_parts(&parts, uri),
        None => false,
    }
}

/// A piece of a template.
#[derive(Debug, PartialEq)]
enum Part<'a> {
    Literal(&'a str),
    /// An expression, by its operator (`None` for a simple one).
    Expression(Option<char>),
}

/// The template's parts; `None` if a brace is unclosed.
fn parse(template: &str) -> Option<Vec<Part<'_>>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        let close = open + rest[open..].find('}')?;
        let operator = rest[open + 1..close]
            .chars()
            .next()
            .filter(|c| "+#./;?&".contains(*c));
        parts.push(Part::Expression(operator));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }
    Some(parts)
}

fn match_parts(parts: &[Part<'_>], uri: &str) -> bool {
    match parts.split_first() {
        None => uri.is_empty(),
        Some((Part::Literal(literal), rest)) => uri
            .strip_prefix(literal)
            .is_some_and(|tail| match_parts(rest, tail)),
        Some((Part::Expression(operator), rest)) => {
            // Every split point the expression could end at, shortest first; an expression
            // may expand to nothing (undefined variables).
            let allowed = |c: char| match operator {
                None => !"/?#".contains(c),
                Some('+' | '#' | '/' | ';') => true,
                Some('.') => c != '/',
                Some(_) => c != '#',
            };
            let starts_right = |taken: &str| match operator {
                Some(op @ ('#' | '/' | '.' | ';' | '?' | '&')) => {
                    taken.is_empty() || taken.starts_with(*op)
                }
                _ => true,
            };
            let mut end = 0;
            loop {
                let taken = &uri[..end];
                if starts_right(taken) && match_parts(rest, &uri[end..]) {
                    return true;
                }
                match uri[end..].chars().next() {
                    Some(c) if allowed(c) || (end == 0 && starts_right(&uri[..c.len_utf8()])) => {
                        end += c.len_utf8()
                    }
                    _ => return false,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn simple_expressions_match_one_segment() {
        assert!(matches("demo://echo/{text}", "demo://echo/hello"));
        assert!(matches("demo://echo/{text}", "demo://echo/hello%2Fworld"));
        assert!(!matches("demo://echo/{text}", "demo://echo/a/b"));
        assert!(!matches("demo://echo/{text}", "demo://other/hello"));
        assert!(matches(
            "file:///{dir}/{name}.txt",
            "file:///docs/readme.txt"
        ));
        assert!(!matches(
            "file:///{dir}/{name}.txt",
            "file:///docs/readme.md"
        ));
        assert!(matches(
            "test://template/{id}/data",
            "test://template/123/data"
        ));
    }

    #[test]
    fn reserved_and_path_expressions_span_slashes() {
        assert!(matches("file://{+path}", "file:///a/b/c"));
        assert!(matches("repo://x{/segments}", "repo://x/a/b"));
        assert!(matches(
            "search://q{?term,limit}",
            "search://q?term=a&limit=2"
        ));
        assert!(matches("search://q{?term}", "search://q"));
        assert!(!matches("search://q{?term}", "search://qx"));
    }

    #[test]
    fn a_literal_template_matches_only_itself_and_bad_templates_match_nothing() {
        assert!(matches("demo://readme", "demo://readme"));
        assert!(!matches("demo://readme", "demo://readme2"));
        assert!(!matches("demo://{unclosed", "demo://x"));
    }
}
