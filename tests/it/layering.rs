//! The crate's layering, checked on every test run: which folder of `src/` may use which, and
//! no circle of imports between files or between top-level folders. The same graph as the
//! team's `rust_imports.py --folders` (a file's `use` items and its `crate::`/`super::`/`self::`
//! paths, test modules left out), read with `syn` so that CI needs nothing outside the
//! repository. A rule broken names the file and what it imports.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use syn::visit::{self, Visit};

/// `(from, to)`: no file under `from` imports one under `to` (prefixes of paths under `src/`).
const NEVER: &[(&str, &str)] = &[
    // A face never imports another face.
    ("faces/grpc", "faces/mcp"),
    ("faces/mcp", "faces/grpc"),
    ("faces/mcp/http", "faces/mcp/stdio"),
    ("faces/mcp/stdio", "faces/mcp/http"),
    // The core imports no face; upstream imports neither the core nor a face.
    ("core", "faces"),
    ("upstream", "core"),
    ("upstream", "faces"),
    // telemetry does not import upstream; the HTTP/2 pieces and the proto sit below the core.
    ("telemetry", "upstream"),
    ("http2", "core"),
    ("http2", "faces"),
    ("http2", "upstream"),
    ("proto", "core"),
    ("proto", "faces"),
    ("proto", "upstream"),
];

/// Folders that import nothing of the crate but themselves and those listed.
const ONLY: &[(&str, &[&str])] = &[
    ("domain", &[]),
    ("proto", &["domain"]),
    ("shared_state", &["domain"]),
];

/// A module's path (`["upstream", "pool"]`) and the file that holds it, for every file of `src`
/// but test modules.
fn modules(src: &Path) -> BTreeMap<Vec<String>, String> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    dirs.push(path);
                }
                continue;
            }
            let rel = path
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            // main.rs is the binary, a crate of its own that uses this one.
            if path.extension().is_none_or(|e| e != "rs")
                || rel == "main.rs"
                || name == "tests"
                || name.ends_with("_tests")
            {
                continue;
            }
            let mut module: Vec<String> = Path::new(&rel)
                .with_extension("")
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            if matches!(name.as_str(), "mod" | "lib" | "main") {
                module.pop();
            }
            found.insert(module, rel);
        }
    }
    found
}

/// Every path a file names that starts at `crate`, `super` or `self`, outside test modules.
#[derive(Default)]
struct Paths(Vec<Vec<String>>);

impl Paths {
    fn add_use(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.add_use(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => self.0.push(with(prefix, &name.ident)),
            syn::UseTree::Rename(rename) => self.0.push(with(prefix, &rename.ident)),
            syn::UseTree::Glob(_) => self.0.push(prefix.clone()),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.add_use(prefix, tree);
                }
            }
        }
    }
}

fn with(prefix: &[String], last: &syn::Ident) -> Vec<String> {
    let mut path = prefix.to_vec();
    path.push(last.to_string());
    path
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Impl(i) => &i.attrs,
            _ => return visit::visit_item(self, item),
        };
        if !is_test(attrs) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.add_use(&mut Vec::new(), &item.tree);
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(crate)`, `pub(in crate::upstream)`: who may see an item, not what it uses.
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.0
            .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Macro arguments are tokens to syn: read `crate :: a :: b` out of them.
        let text = mac.tokens.to_string().replace(" :: ", "::");
        for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
            if word.starts_with("crate::") || word.starts_with("super::") {
                self.0.push(word.split("::").map(str::to_owned).collect());
            }
        }
        visit::visit_macro(self, mac);
    }
}

/// The file a path names, from module `here` (the longest prefix that is a module).
fn resolve(
    path: &[String],
    here: &[String],
    modules: &BTreeMap<Vec<String>, String>,
) -> Option<String> {
    let (mut base, mut rest) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("super" | "self") => (here.to_vec(), path),
        _ => return None,
    };
    while let Some(first) = rest.first().map(String::as_str) {
        match first {
            "super" => {
                base.pop();
            }
            "self" => {}
            _ => break,
        }
        rest = &rest[1..];
    }
    (0..=rest.len()).rev().find_map(|n| {
        let mut key = base.clone();
        key.extend_from_slice(&rest[..n]);
        modules.get(&key).cloned()
    })
}

/// The file graph: which files each file imports (a module's own submodules left out:
/// declaring and re-exporting them is structure, not a dependency).
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(src);
    let mut edges = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(src.join(file)).unwrap();
        let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut paths = Paths::default();
        paths.visit_file(&parsed);
        let own = PathBuf::from(file).with_extension("");
        let own = if own.ends_with("mod") {
            own.parent().unwrap().to_path_buf()
        } else {
            own
        };
        let targets: BTreeSet<String> = paths
            .0
            .iter()
            .filter_map(|path| resolve(path, module, &modules))
            .filter(|target| target != file && !Path::new(target).starts_with(&own))
            .collect();
        edges.insert(file.clone(), targets);
    }
    edges
}

/// The strongly connected components of more than one node (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w.as_str()]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w.as_str()) {
                    let low = self.low[v].min(self.index[w.as_str()]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let at = self.stack.iter().rposition(|x| *x == v).unwrap();
                let component: Vec<String> = self.stack.drain(at..).map(str::to_owned).collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

fn folder(file: &str) -> String {
    let first = Path::new(file).iter().next().unwrap().to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

fn under(file: &str, prefix: &str) -> bool {
    Path::new(file).starts_with(prefix) || file.trim_end_matches(".rs") == prefix
}

/// What breaks the layering in the graph `edges`, one line each.
fn breaches(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut found = Vec::new();
    for (from, targets) in edges {
        for to in targets {
            for (never_from, never_to) in NEVER {
                if under(from, never_from) && under(to, never_to) {
                    found.push(format!(
                        "forbidden: {from} -> {to} ({never_from} never imports {never_to})"
                    ));
                }
            }
            for (only, allowed) in ONLY {
                let target = folder(to);
                if under(from, only) && target != *only && !allowed.contains(&target.as_str()) {
                    found.push(format!(
                        "forbidden: {from} -> {to} ({only} imports only {allowed:?})"
                    ));
                }
            }
        }
    }
    found.extend(
        circles(edges)
            .iter()
            .map(|c| format!("circle: {}", c.join(" <-> "))),
    );
    let mut folders: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in edges {
        let entry = folders.entry(folder(from)).or_default();
        entry.extend(
            targets
                .iter()
                .map(|t| folder(t))
                .filter(|t| *t != folder(from)),
        );
    }
    found.extend(
        circles(&folders)
            .iter()
            .map(|c| format!("folder circle: {}", c.join(" <-> "))),
    );
    found
}

#[test]
fn faces_core_upstream_and_domain_keep_their_layers_with_no_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = graph(&src);
    assert!(
        edges.len() > 100,
        "the graph covers src/: {} files",
        edges.len()
    );
    let breaches = breaches(&edges);
    assert!(breaches.is_empty(), "{}", breaches.join("\n"));
}

#[test]
fn a_face_importing_another_and_a_circle_are_caught() {
    // The checker itself can fail: a forbidden edge, a file circle and a folder circle.
    let edge = |a: &str, b: &str| (a.to_owned(), BTreeSet::from([b.to_owned()]));
    let edges = BTreeMap::from([
        edge("faces/mcp/stdio/from_proto.rs", "faces/grpc/messages.rs"),
        edge("faces/grpc/messages.rs", "domain/tool.rs"),
        edge("domain/tool.rs", "auth/mod.rs"),
        edge("auth/mod.rs", "domain/grants.rs"),
        edge("domain/grants.rs", "domain/tool.rs"),
    ]);
    let found = breaches(&edges);
    assert!(
        found
            .iter()
            .any(|b| b.starts_with("forbidden: faces/mcp/stdio/from_proto.rs -> faces/grpc")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|b| b.starts_with("forbidden: domain/tool.rs -> auth/mod.rs")),
        "{found:?}"
    );
    assert!(found.iter().any(|b| b.starts_with("circle: ")), "{found:?}");
    assert!(found.iter().any(|b| b == "folder circle: auth <-> domain" || b == "folder circle: domain <-> auth"), "{found:?}");
}

#[test]
fn paths_in_uses_expressions_and_macros_are_read() {
    let file: syn::File = syn::parse_str(
        "use super::{a::B, c::{self, D}};\n\
         fn f() { crate::e::g(); tracing::info!(x = %crate::h::i()); }\n\
         #[cfg(test)] mod tests { use crate::hidden::X; }",
    )
    .unwrap();
    let mut paths = Paths::default();
    paths.visit_file(&file);
    let joined: Vec<String> = paths.0.iter().map(|p| p.join("::")).collect();
    for expected in [
        "super::a::B",
        "super::c::self",
        "super::c::D",
        "crate::e::g",
        "crate::h::i",
    ] {
        assert!(
            joined.contains(&expected.to_owned()),
            "{expected} in {joined:?}"
        );
    }
    assert!(
        !joined.iter().any(|p| p.contains("hidden")),
        "test modules are left out: {joined:?}"
    );
}
