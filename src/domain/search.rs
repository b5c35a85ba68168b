//! Tool search: BM25 over each tool's name words, title, description, and parameter names and
//! descriptions. Words go through the `bm25` crate's English analysis (Unicode normalization,
//! stop words, Snowball stemming); the index is an inverted index of interned terms, built
//! once per catalog revision and only read by queries. (The crate's own embedder and scorer
//! took 425 ms to index 10,002 tools and 2.1 ms for a broad query, 229 ms and 1.75 ms with
//! each word tokenized once: a `String` per token, and a linear scan of each matching
//! document; this index takes 36 ms and 0.06 ms. See docs/performance.md, "Tool search
//! (issue 19)".) Pure.

use std::sync::{Mutex, PoisonError};

use bm25::{DefaultTokenizer, Language, Tokenizer as _};
use fnv::FnvHashMap;

use super::tool::ExposedTool;

/// Name words count this many times: a tool named for the task beats one that mentions it.
const NAME_WEIGHT: usize = 2;
/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's document-length normalization.
const B: f32 = 0.75;

/// A term's number in the index.
type Term = u32;

/// Turns text into terms: identifiers split into words (`read_file`, `readFile` and
/// `HTTPServer` into `read file`, `read File`, `HTTP Server`), each word analysed once by the
/// English tokenizer and remembered, since a catalog repeats a small vocabulary thousands of
/// times.
struct Analyzer {
    english: DefaultTokenizer,
    /// A word as written → its terms (none for a stop word).
    words: FnvHashMap<String, Vec<Term>>,
    /// A stem → its term.
    terms: FnvHashMap<String, Term>,
}

impl Analyzer {
    fn new() -> Self {
        Self {
            english: DefaultTokenizer::new(Language::English),
            words: FnvHashMap::default(),
            terms: FnvHashMap::default(),
        }
    }

    /// Adds the terms of `text` to `out`, numbering new stems.
    fn index_terms(&mut self, text: &str, out: &mut Vec<Term>) {
        for word in split_words(text).split_whitespace() {
            if is_number(word) {
                // Its own term: numbers have no stems, and are mostly each tool's own.
                let term = match self.terms.get(word) {
                    Some(&term) => term,
                    None => {
                        let next = self.terms.len() as Term;
                        self.terms.insert(word.to_owned(), next);
                        next
                    }
                };
                out.push(term);
                continue;
            }
            if let Some(terms) = self.words.get(word) {
                out.extend_from_slice(terms);
                continue;
            }
            let terms: Vec<Term> = self
                .english
                .tokenize(word)
                .into_iter()
                .map(|stem| {
                    let next = self.terms.len() as Term;
                    *self.terms.entry(stem).or_insert(next)
                })
                .collect();
            out.extend_from_slice(&terms);
            self.words.insert(word.to_owned(), terms);
        }
    }

    /// The terms of a query that the index knows, each once.
    fn query_terms(&self, text: &str) -> Vec<Term> {
        let mut terms: Vec<Term> = Vec::new();
        for word in split_words(text).split_whitespace() {
            if is_number(word) {
                terms.extend(self.terms.get(word).copied());
                continue;
            }
            match self.words.get(word) {
                Some(known) => terms.extend_from_slice(known),
                None => terms.extend(
                    self.english
                        .tokenize(word)
                        .iter()
                        .filter_map(|stem| self.terms.get(stem).copied()),
                ),
            }
        }
        terms.sort_unstable();
        terms.dedup();
        terms
    }
}

/// Whether `word` is all ASCII digits.
fn is_number(word: &str) -> bool {
    word.bytes().all(|b| b.is_ascii_digit())
}

/// `text` with a space in place of every character that is neither a letter, a digit nor an
/// apostrophe (so at `_`, `-`, `.`, `/`), and at every case change inside a word.
pub fn split_words(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        if !(c.is_alphanumeric() || c == '\'') {
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

/// A parameter's name and description, as the index reads them.
pub type ParamText = (String, String);

/// What is indexed of one tool, written into `text`.
fn document(tool: &ExposedTool, params: &[ParamText], text: &mut String) {
    let spec = &tool.spec;
    text.clear();
    for _ in 0..NAME_WEIGHT {
        text.push_str(tool.name.as_str());
        text.push_str(". ");
    }
    if let Some(title) = spec.display_title() {
        text.push_str(title);
        text.push_str(". ");
    }
    text.push_str(&spec.description);
    for (name, description) in params {
        text.push_str(". ");
        text.push_str(name);
        text.push(' ');
        text.push_str(description);
    }
}

/// The search index of one catalog revision; documents are numbered in the order given.
pub struct SearchIndex {
    /// Read by queries only; the lock is never contended for long (a query's few words).
    analyzer: Mutex<Analyzer>,
    /// For each term, the documents that have it and how often.
    postings: Vec<Vec<(u32, u16)>>,
    /// Each document's length in terms, as BM25's normalization wants it: `1 - b + b·len/avg`.
    length_norm: Vec<f32>,
}

impl SearchIndex {
    /// Indexes `tools`, each with its parameters' texts; a match names a tool by its
    /// position among them.
    pub fn build<'a>(tools: impl IntoIterator<Item = (&'a ExposedTool, Vec<ParamText>)>) -> Self {
        let mut analyzer = Analyzer::new();
        let mut postings: Vec<Vec<(u32, u16)>> = Vec::new();
        let mut lengths: Vec<u32> = Vec::new();
        let mut terms = Vec::new();
        let mut text = String::new();
        for (id, (tool, params)) in tools.into_iter().enumerate() {
            document(tool, &params, &mut text);
            terms.clear();
            analyzer.index_terms(&text, &mut terms);
            lengths.push(terms.len() as u32);
            terms.sort_unstable();
            for run in terms.chunk_by(|a, b| a == b) {
                let term = run[0] as usize;
                if term >= postings.len() {
                    postings.resize_with(term + 1, Vec::new);
                }
                let count = u16::try_from(run.len()).unwrap_or(u16::MAX);
                postings[term].push((id as u32, count));
            }
        }
        let average =
            lengths.iter().map(|&l| f64::from(l)).sum::<f64>() / lengths.len().max(1) as f64;
        let average = average.max(1.0) as f32;
        let length_norm = lengths
            .iter()
            .map(|&length| 1.0 - B + B * length as f32 / average)
            .collect();
        Self {
            analyzer: Mutex::new(analyzer),
            postings,
            length_norm,
        }
    }

    /// How many tools it indexes.
    pub fn len(&self) -> usize {
        self.length_norm.len()
    }

    /// Whether it indexes no tool.
    pub fn is_empty(&self) -> bool {
        self.length_norm.is_empty()
    }

    /// The best `limit` matches among the tools `visible` accepts, best first, as (position,
    /// score); ties keep catalog order, so answers are stable.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        visible: impl Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        let terms = self
            .analyzer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .query_terms(query);
        let documents = self.len() as f32;
        let mut scores = vec![0f32; self.len()];
        for term in terms {
            let postings = &self.postings[term as usize];
            let frequency = postings.len() as f32;
            let idf = (1.0 + (documents - frequency + 0.5) / (frequency + 0.5)).ln();
            for &(id, count) in postings {
                let count = f32::from(count);
                let norm = self.length_norm[id as usize];
                scores[id as usize] += idf * count * (K1 + 1.0) / (count + K1 * norm);
            }
        }
        let mut matches: Vec<(usize, f32)> = scores
            .into_iter()
            .enumerate()
            .filter(|&(id, score)| score > 0.0 && visible(id))
            .collect();
        let best_first =
            |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if matches.len() > limit && limit > 0 {
            matches.select_nth_unstable_by(limit - 1, best_first);
        }
        matches.truncate(limit);
        matches.sort_unstable_by(best_first);
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

    /// The index of `tools`, their parameters' texts converted from their schemas (the
    /// broker reads them from the revision's encoded tools instead).
    fn index(tools: &[ExposedTool]) -> SearchIndex {
        let texts = |spec: &ToolSpec| -> Vec<ParamText> {
            let params = spec.params().into_iter();
            params.map(|p| (p.name, p.description)).collect()
        };
        SearchIndex::build(tools.iter().map(|t| (t, texts(&t.spec))))
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
        assert_eq!(split_words("(tool 42, JSON)."), " tool 42  JSON  ");
    }

    #[test]
    fn the_best_tool_comes_first_and_stemming_helps() {
        let tools = catalog();
        let index = index(&tools);
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
        let index = index(&tools);
        let found = index.search("file", 10, |i| tools[i].name.as_str() != "fs_read_file");
        assert_eq!(names(&tools, &found), ["fs_writeFile"]);
        assert_eq!(index.search("file path", 1, |_| true).len(), 1);
    }

    #[test]
    fn numbers_are_terms_of_their_own() {
        let tools = vec![
            tool(
                "v2_api",
                "Calls version 2 of the API.",
                json!({"type": "object"}),
            ),
            tool(
                "v3_api",
                "Calls version 3 of the API.",
                json!({"type": "object"}),
            ),
        ];
        let index = index(&tools);
        assert_eq!(
            names(&tools, &index.search("api version 3", 1, |_| true)),
            ["v3_api"]
        );
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn parameter_words_are_searched() {
        let tools = catalog();
        let index = index(&tools);
        let found = names(&tools, &index.search("summary", 10, |_| true));
        assert_eq!(found, ["jira_create_issue"]);
    }
}
