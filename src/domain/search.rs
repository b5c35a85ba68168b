//! Tool search: a BM25 index (the `bm25` crate's English tokenizer, with stemming and stop
//! words, and its scorer) over each tool's name words, title, description, and parameter names
//! and descriptions. Built once per catalog revision; queries only read it. Pure.

use bm25::{DefaultTokenizer, Embedder, EmbedderBuilder, Language, Scorer, Tokenizer};

use super::tool::ExposedTool;

/// Name words count this many times: a tool named for the task beats one that mentions it.
const NAME_WEIGHT: usize = 2;

/// Splits identifiers into words before the English tokenizer sees them: `read_file`,
/// `read-file`, `readFile` and `HTTPServer` become `read file` and `HTTP Server`.
#[derive(Debug)]
struct WordsTokenizer(DefaultTokenizer);

impl Default for WordsTokenizer {
    fn default() -> Self {
        Self(DefaultTokenizer::new(Language::English))
    }
}

impl Tokenizer for WordsTokenizer {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        self.0.tokenize(&split_words(input_text))
    }
}

/// `text` with a space at every `_`, `-`, `.`, `/` and case change inside a word.
pub fn split_words(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        if matches!(c, '_' | '-' | '.' | '/' | ':') {
            out.push(' ');
            continue;
        }
        let previous = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        let boundary = c.is_uppercase()
            && previous.is_some_and(|p| {
                p.is_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
            });
        if boundary {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// What is indexed of one tool.
fn document(tool: &ExposedTool) -> String {
    let spec = &tool.spec;
    let mut text = String::new();
    for _ in 0..NAME_WEIGHT {
        text.push_str(tool.name.as_str());
        text.push_str(". ");
    }
    if let Some(title) = &spec.annotations.title {
        text.push_str(title);
        text.push_str(". ");
    }
    text.push_str(&spec.description);
    for param in spec.params.iter() {
        text.push_str(". ");
        text.push_str(&param.name);
        text.push(' ');
        text.push_str(&param.description);
    }
    text
}

/// The search index of one catalog revision; documents are numbered in the order given.
pub struct SearchIndex {
    embedder: Embedder<u32, WordsTokenizer>,
    scorer: Scorer<usize>,
}

impl SearchIndex {
    /// Indexes `tools`; a match names a tool by its position among them.
    pub fn build<'a>(tools: impl IntoIterator<Item = &'a ExposedTool>) -> Self {
        let documents: Vec<String> = tools.into_iter().map(document).collect();
        let corpus: Vec<&str> = documents.iter().map(String::as_str).collect();
        let embedder =
            EmbedderBuilder::with_tokenizer_and_fit_to_corpus(WordsTokenizer::default(), &corpus)
                .build();
        let mut scorer = Scorer::new();
        for (id, text) in corpus.iter().enumerate() {
            scorer.upsert(&id, embedder.embed(text));
        }
        Self { embedder, scorer }
    }

    /// The best `limit` matches among the tools `visible` accepts, best first, as (position,
    /// score); ties keep catalog order, so answers are stable.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        visible: impl Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        let query = self.embedder.embed(query);
        let mut matches: Vec<(usize, f32)> = self
            .scorer
            .matches(&query)
            .into_iter()
            .filter(|found| found.score > 0.0 && visible(found.id))
            .map(|found| (found.id, found.score))
            .collect();
        matches.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        matches.truncate(limit);
        matches
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Map, Value, json};

    use super::*;
    use crate::domain::{
        names::{ExposedName, ServerName, ToolName},
        tool::{Annotations, ToolSpec},
    };

    fn tool(name: &str, description: &str, schema: Value) -> ExposedTool {
        let Value::Object(schema) = schema else {
            panic!("object schema")
        };
        ExposedTool {
            name: ExposedName::derive("", name).0,
            server: ServerName::parse("s").unwrap(),
            spec: Arc::new(ToolSpec::new(
                ToolName::new(name),
                description.into(),
                schema,
                None,
                Annotations::default(),
            )),
            fixed: Arc::new(Map::new()),
        }
    }

    fn catalog() -> Vec<ExposedTool> {
        let path = json!({"type": "object", "properties": {"path": {"type": "string", "description": "Where the file is"}}});
        vec![
            tool(
                "fs_read_file",
                "Read the complete contents of a file.",
                path.clone(),
            ),
            tool("fs_writeFile", "Create a new file or overwrite one.", path),
            tool(
                "jira_create_issue",
                "Open a ticket in the tracker.",
                json!({"type": "object", "properties": {"summary": {"type": "string"}}}),
            ),
            tool("echo", "Echoes back the input.", json!({"type": "object"})),
        ]
    }

    fn names(tools: &[ExposedTool], found: &[(usize, f32)]) -> Vec<String> {
        found
            .iter()
            .map(|(i, _)| tools[*i].name.as_str().to_owned())
            .collect()
    }

    #[test]
    fn identifiers_split_into_words() {
        assert_eq!(split_words("read_file"), "read file");
        assert_eq!(split_words("writeFile"), "write File");
        assert_eq!(split_words("HTTPServer-v2"), "HTTP Server v2");
        assert_eq!(split_words("get2Items"), "get2 Items");
    }

    #[test]
    fn the_best_tool_comes_first_and_stemming_helps() {
        let tools = catalog();
        let index = SearchIndex::build(&tools);
        let all = |_: usize| true;
        assert_eq!(
            names(&tools, &index.search("read a file", 10, all))[0],
            "fs_read_file"
        );
        assert_eq!(
            names(&tools, &index.search("writing files", 10, all))[0],
            "fs_writeFile"
        );
        assert_eq!(
            names(&tools, &index.search("create issue", 1, all)),
            ["jira_create_issue"]
        );
        assert!(
            index.search("the of and", 10, all).is_empty(),
            "stop words match nothing"
        );
        assert!(index.search("kubernetes", 10, all).is_empty());
        let scores: Vec<f32> = index.search("file", 10, all).iter().map(|m| m.1).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    }

    #[test]
    fn only_visible_tools_are_returned_and_the_limit_holds() {
        let tools = catalog();
        let index = SearchIndex::build(&tools);
        let found = index.search("file", 10, |i| tools[i].name.as_str() != "fs_read_file");
        assert_eq!(names(&tools, &found), ["fs_writeFile"]);
        assert_eq!(index.search("file path", 1, |_| true).len(), 1);
    }

    #[test]
    fn parameter_words_are_searched() {
        let tools = catalog();
        let index = SearchIndex::build(&tools);
        let found = names(&tools, &index.search("summary", 10, |_| true));
        assert_eq!(found, ["jira_create_issue"]);
    }
}
