//! The grpcurl recipes of the README and of docs/grpcurl.md, run with the real grpcurl against a
//! real broker serving the demo, so the documentation cannot drift from the service.

use std::collections::HashMap;

use crate::common::{Broker, grpcurl, toolbroker_bin};

/// A recipe: a grpcurl command line and the texts its output must contain.
struct Recipe {
    command: String,
    expect: Vec<String>,
}

/// The broker a group of recipes runs against: the default one (no config), or one a
/// `VAR=value toolbroker serve --config FILE &` line starts with the ```yaml block headed
/// `# FILE`.
#[derive(Default)]
struct Group {
    config: Option<String>,
    env: Vec<(String, String)>,
    recipes: Vec<Recipe>,
}

/// The `grpcurl` lines of a document's ```sh blocks and their `# expect:` lines.
fn recipes(document: &str) -> Vec<Group> {
    let path = format!("{}/{document}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let mut groups = vec![Group::default()];
    let mut yaml_files: HashMap<String, String> = HashMap::new();
    let mut block: Option<(String, String)> = None; // (language, text so far)
    for line in text.lines() {
        match (line.trim(), block.as_mut()) {
            (fence, None) if fence.starts_with("```") => {
                block = Some((fence[3..].to_owned(), String::new()));
            }
            ("```", Some((language, body))) => {
                if let Some(name) = body.lines().next().and_then(|l| l.strip_prefix("# "))
                    && language == "yaml"
                {
                    yaml_files.insert(name.to_owned(), body.clone());
                }
                block = None;
            }
            (_, Some((language, body))) if language == "yaml" => {
                body.push_str(line);
                body.push('\n');
            }
            (l, Some((language, _))) if language == "sh" => {
                if let Some(start) = l.strip_suffix(" &")
                    && let Some((env, file)) = start.split_once("toolbroker serve --config ")
                {
                    let env = env
                        .split_whitespace()
                        .filter_map(|pair| pair.split_once('='))
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .collect();
                    let config = yaml_files.get(file).unwrap_or_else(|| {
                        panic!("{document}: no ```yaml block headed `# {file}` before {l:?}")
                    });
                    groups.push(Group {
                        config: Some(config.clone()),
                        env,
                        recipes: Vec::new(),
                    });
                } else if let Some(want) = l.strip_prefix("# expect: ") {
                    let group = groups.last_mut().unwrap();
                    let recipe = group.recipes.last_mut();
                    let recipe = recipe.expect("an expect line follows a command");
                    recipe.expect.push(want.to_owned());
                } else if l.starts_with("grpcurl ") || l.contains("| grpcurl ") {
                    groups.last_mut().unwrap().recipes.push(Recipe {
                        command: l.to_owned(),
                        expect: Vec::new(),
                    });
                }
            }
            _ => {}
        }
    }
    groups
}

/// The socket path the recipes name, and the one each run uses instead (tests run at once).
const RECIPE_SOCKET: &str = "/tmp/toolbroker.sock";

async fn start(group: &Group, socket: &str) -> Broker {
    let broker = match &group.config {
        None => Broker::builder().without_config(),
        Some(config) => {
            // The README's own text: only the program it names is made ours.
            let bin = toolbroker_bin();
            let config = config
                .replace("command: toolbroker", &format!("command: {bin:?}"))
                .replace(RECIPE_SOCKET, socket);
            let env = group.env.iter();
            env.fold(Broker::builder().config_text(&config), |broker, (k, v)| {
                broker.env(k, v)
            })
        }
    };
    let broker = broker.start().await;
    broker.wait_ready().await;
    broker
}

/// Runs every recipe of `document`; with `must_succeed`, grpcurl must also exit 0 (the
/// README's recipes all succeed; docs/grpcurl.md shows failures and `-max-time` ends too).
async fn run_document(document: &str, must_succeed: bool, at_least: usize) {
    let groups = recipes(document);
    let count: usize = groups.iter().map(|g| g.recipes.len()).sum();
    assert!(count >= at_least, "{document} lost its recipes ({count})");
    let grpcurl = grpcurl();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("toolbroker.sock").display().to_string();
    for group in groups.iter().filter(|g| !g.recipes.is_empty()) {
        let broker = start(group, &socket).await;
        for recipe in &group.recipes {
            assert!(
                !recipe.expect.is_empty(),
                "{document}: {} says what to expect",
                recipe.command
            );
            let line = recipe
                .command
                .replace("127.0.0.1:50051", &broker.addr.to_string())
                .replace(RECIPE_SOCKET, &socket)
                .replacen("grpcurl ", &format!("{} ", grpcurl.display()), 1);
            let output = tokio::process::Command::new("sh")
                .args(["-c", &line])
                .output()
                .await
                .expect("run grpcurl");
            let printed = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(
                output.status.success() || !must_succeed,
                "{document}: {}\n{printed}",
                recipe.command,
            );
            for want in &recipe.expect {
                assert!(
                    printed.contains(want.as_str()),
                    "{document}: {}\nexpected {want:?} in:\n{printed}",
                    recipe.command
                );
            }
        }
    }
}

#[tokio::test]
async fn readme_grpcurl_recipes_work() {
    run_document("README.md", true, 8).await;
}

#[tokio::test]
async fn grpcurl_guide_recipes_work() {
    run_document("docs/grpcurl.md", false, 20).await;
}
