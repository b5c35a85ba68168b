//! The README's grpcurl recipes, run with the real grpcurl against a real broker serving the
//! demo, so the documentation cannot drift from the service.

mod common;

use common::{Broker, grpcurl, toolbroker_bin};

/// A recipe: a grpcurl command line and the texts its output must contain.
struct Recipe {
    command: String,
    expect: Vec<String>,
}

/// The `grpcurl` lines of the README's ```sh blocks and their `# expect:` lines.
fn recipes() -> Vec<Recipe> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut recipes: Vec<Recipe> = Vec::new();
    let mut in_sh = false;
    for line in readme.lines() {
        match line.trim() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            l if in_sh && l.starts_with("grpcurl ") => recipes.push(Recipe {
                command: l.to_owned(),
                expect: Vec::new(),
            }),
            l if in_sh && l.starts_with("# expect: ") => recipes
                .last_mut()
                .expect("an expect line follows a command")
                .expect
                .push(l["# expect: ".len()..].to_owned()),
            _ => {}
        }
    }
    recipes
}

#[tokio::test]
async fn readme_grpcurl_recipes_work() {
    let recipes = recipes();
    assert!(recipes.len() >= 8, "the README lost its recipes");
    assert!(
        recipes.iter().all(|r| !r.expect.is_empty()),
        "every recipe says what to expect"
    );
    let grpcurl = grpcurl();

    let mut command = tokio::process::Command::new(toolbroker_bin());
    command.args(["--listen", "127.0.0.1:0", "--log-format", "json"]);
    let broker = Broker::spawn(command, tempfile::tempdir().unwrap()).await;
    broker.wait_ready().await;

    for recipe in recipes {
        let line = recipe
            .command
            .replace("127.0.0.1:50051", &broker.addr.to_string())
            .replacen("grpcurl", &grpcurl.display().to_string(), 1);
        let output = tokio::process::Command::new("sh")
            .args(["-c", &line])
            .output()
            .await
            .expect("run grpcurl");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{}\n{stdout}\n{}",
            recipe.command,
            String::from_utf8_lossy(&output.stderr)
        );
        for want in &recipe.expect {
            assert!(
                stdout.contains(want.as_str()),
                "{}\nexpected {want:?} in:\n{stdout}",
                recipe.command
            );
        }
    }
}
