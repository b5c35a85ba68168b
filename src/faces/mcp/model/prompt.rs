//! Prompts as MCP's `prompts/list` declares them. Pure.

use rmcp::model::{Prompt, PromptArgument};

use super::{given, icon};
use crate::domain::offer::PromptSpec;

/// The prompt `spec` exposed as `name`: empty texts absent, and no `arguments` when it takes
/// none.
pub fn prompt(name: &str, spec: &PromptSpec) -> Prompt {
    let arguments: Vec<PromptArgument> = spec
        .arguments
        .iter()
        .map(|argument| {
            let mut out =
                PromptArgument::new(argument.name.clone()).with_required(argument.required);
            out.description = given(argument.description.as_deref());
            out
        })
        .collect();
    let mut prompt = Prompt::new(
        name.to_owned(),
        given(spec.description.as_deref()),
        (!arguments.is_empty()).then_some(arguments),
    );
    prompt.title = given(spec.title.as_deref());
    prompt.icons = icon::icons(&spec.icons);
    prompt
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::{icon::Icon, offer::PromptArgumentSpec};

    #[test]
    fn a_prompt_shows_its_exposed_name_and_only_what_it_has() {
        let spec = PromptSpec {
            original: "summarize".into(),
            title: Some("Summarize".into()),
            description: Some("Summarizes.".into()),
            arguments: vec![PromptArgumentSpec {
                name: "topic".into(),
                description: Some(String::new()),
                required: true,
            }],
            icons: [Icon {
                src: "https://example.com/s.png".into(),
                ..Icon::default()
            }]
            .into(),
        };
        assert_eq!(
            serde_json::to_value(prompt("d_summarize", &spec)).unwrap(),
            json!({"name": "d_summarize", "title": "Summarize", "description": "Summarizes.",
                   "arguments": [{"name": "topic", "required": true}],
                   "icons": [{"src": "https://example.com/s.png"}]})
        );
        let bare = PromptSpec::default();
        assert_eq!(
            serde_json::to_value(prompt("d_bare", &bare)).unwrap(),
            json!({"name": "d_bare"})
        );
    }
}
