//! The install lines of the READMEs (and of the command's guide): the ones that claim to work
//! from a clone of the repository must name paths that exist and packages, libraries and
//! binaries the workspace declares, and a line of the published form (`cargo add
//! redlock-quorum`, `cargo install redlock-cli`) must sit in a block marked as not published
//! yet. The workspace's own `cargo metadata` is the reference, so a renamed package, a moved
//! directory or a new repository address breaks this test rather than a reader's install.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The documents with install lines, from the workspace root, and the package each must
/// show how to install from a clone (`None`: the overview, which shows them all).
const DOCUMENTS: [(&str, Option<&str>); 6] = [
    ("README.md", None),
    ("redlock/README.md", Some("redlock-quorum")),
    ("redlock/core/README.md", Some("redlock-core")),
    ("cli/README.md", Some("redlock-cli")),
    ("simulator/README.md", Some("redlock-sim")),
    ("docs/cli.md", Some("redlock-cli")),
];

/// The words that mark a block of published-form lines, in the block itself.
const NOT_PUBLISHED: &str = "published form: not on crates.io yet";

/// Packages of others that the install lines add from crates.io, where they are published.
const FROM_CRATES_IO: [&str; 1] = ["tokio"];

/// A package of the workspace, as `cargo metadata` describes it.
#[derive(Debug)]
struct Package {
    /// Its directory, relative to the workspace root (`redlock/core`).
    dir: String,
    lib: Option<String>,
    bins: Vec<String>,
    publishable: bool,
}

struct Workspace {
    root: PathBuf,
    repository: String,
    packages: BTreeMap<String, Package>,
}

impl Workspace {
    fn read() -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf();
        let output = Command::new(env!("CARGO"))
            .args(["metadata", "--no-deps", "--format-version", "1"])
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let root = PathBuf::from(metadata["workspace_root"].as_str().unwrap());
        let mut repository = None;
        let mut packages = BTreeMap::new();
        for package in metadata["packages"].as_array().unwrap() {
            let manifest = Path::new(package["manifest_path"].as_str().unwrap());
            let dir = manifest
                .parent()
                .unwrap()
                .strip_prefix(&root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            let targets = package["targets"].as_array().unwrap();
            let named = |kind: &str| -> Vec<String> {
                targets
                    .iter()
                    .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == kind))
                    .map(|t| t["name"].as_str().unwrap().to_owned())
                    .collect()
            };
            if let Some(address) = package["repository"].as_str() {
                repository = Some(address.to_owned());
            }
            // `publish = false` reads as an empty list of registries.
            let publishable = !package["publish"]
                .as_array()
                .is_some_and(|registries| registries.is_empty());
            packages.insert(
                package["name"].as_str().unwrap().to_owned(),
                Package {
                    dir,
                    lib: named("lib").into_iter().next(),
                    bins: named("bin"),
                    publishable,
                },
            );
        }
        Self {
            root,
            repository: repository.expect("a package names the repository"),
            packages,
        }
    }

    /// The name a clone gets by default: the repository's last segment.
    fn clone_dir(&self) -> &str {
        self.repository
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap()
    }

    /// The package in `dir`, written from a project next to the clone
    /// (`../redlock-quorum/redlock`), which must exist.
    fn package_at(&self, written: &str, line: &str) -> (&str, &Package) {
        let prefix = format!("../{}/", self.clone_dir());
        let dir = written
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("`{line}`: a path into the clone starts with {prefix}"));
        assert!(
            self.root.join(dir).join("Cargo.toml").is_file(),
            "`{line}`: no package at {dir}"
        );
        self.package_in(dir, line)
    }

    /// The package whose directory is `dir`, relative to the workspace root.
    fn package_in(&self, dir: &str, line: &str) -> (&str, &Package) {
        self.packages
            .iter()
            .find(|(_, package)| package.dir == dir.trim_end_matches('/'))
            .map(|(name, package)| (name.as_str(), package))
            .unwrap_or_else(|| panic!("`{line}`: {dir} is no package of the workspace"))
    }

    fn package(&self, name: &str, line: &str) -> &Package {
        self.packages
            .get(name)
            .unwrap_or_else(|| panic!("`{line}`: the workspace has no package `{name}`"))
    }
}

/// The fenced code blocks of a Markdown text, each as its lines.
fn code_blocks(text: &str) -> Vec<Vec<&str>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some(Vec::new()),
            }
        } else if let Some(block) = current.as_mut() {
            block.push(line);
        }
    }
    blocks
}

/// A line without its trailing `# comment`, split into words.
fn words(line: &str) -> Vec<&str> {
    line.split(" #")
        .next()
        .unwrap()
        .split_whitespace()
        .collect()
}

/// The value of `key = "value"` in an inline TOML table.
fn toml_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!("{key} = \""))? + key.len() + 4;
    let rest = &line[start..];
    Some(&rest[..rest.find('"')?])
}

/// The value after `flag` among `words`.
fn flag<'a>(words: &[&'a str], flag: &str) -> Option<&'a str> {
    let at = words.iter().position(|w| *w == flag)?;
    words.get(at + 1).copied()
}

/// Checks one document; returns the packages its clone-form lines install.
fn check(workspace: &Workspace, document: &str) -> Vec<String> {
    let text = std::fs::read_to_string(workspace.root.join(document)).unwrap();
    check_text(workspace, document, &text)
}

/// Checks the `text` of `document`; returns the packages its clone-form lines install.
fn check_text(workspace: &Workspace, document: &str, text: &str) -> Vec<String> {
    let mut from_clone = Vec::new();
    for block in code_blocks(text) {
        let marked = block.iter().any(|line| line.contains(NOT_PUBLISHED));
        for line in &block {
            let line = line.trim();
            let words = words(line);
            match words.as_slice() {
                ["git", "clone", address, ..] => {
                    assert_eq!(*address, workspace.repository, "{document}: `{line}`");
                }
                ["cargo", command @ ("add" | "install"), ..] => {
                    if let Some(dir) = flag(&words, "--path") {
                        let (name, package) = if *command == "install" {
                            // Run in the clone, after `cd`.
                            workspace.package_in(dir, line)
                        } else {
                            workspace.package_at(dir, line)
                        };
                        if *command == "install" {
                            assert!(!package.bins.is_empty(), "{document}: `{line}`: no binary");
                            // A binary named on the line, in backticks, is one it installs.
                            for named in line.split('`').skip(1).step_by(2) {
                                assert!(
                                    package.bins.iter().any(|b| b == named),
                                    "{document}: `{line}`: {name} has no binary `{named}` ({:?})",
                                    package.bins
                                );
                            }
                        }
                        if let Some(renamed) = flag(&words, "--rename") {
                            assert_eq!(
                                Some(renamed),
                                package.lib.as_deref(),
                                "{document}: `{line}`: the dependency is named as its library"
                            );
                        }
                        from_clone.push(name.to_owned());
                    } else if let Some(address) = flag(&words, "--git") {
                        assert_eq!(address, workspace.repository, "{document}: `{line}`");
                        let name = words.last().unwrap();
                        let package = workspace.package(name, line);
                        if *command == "install" {
                            assert!(!package.bins.is_empty(), "{document}: `{line}`: no binary");
                        }
                    } else {
                        // The published form: only in a block that says it is not published.
                        let name = words
                            .iter()
                            .skip(2)
                            .find(|w| !w.starts_with('-'))
                            .unwrap_or_else(|| panic!("{document}: `{line}` names no package"));
                        if FROM_CRATES_IO.contains(name) {
                            continue;
                        }
                        assert!(
                            marked,
                            "{document}: `{line}` installs from crates.io, where nothing is \
                             published yet: mark its block `# {NOT_PUBLISHED}` and give the \
                             form that works from a clone"
                        );
                        let package = workspace.package(name, line);
                        assert!(package.publishable, "{document}: `{line}`: publish = false");
                    }
                }
                [key, "=", ..] if line.contains('{') => {
                    let name = toml_value(line, "package").unwrap_or(key);
                    if let Some(dir) = toml_value(line, "path") {
                        let (found, _) = workspace.package_at(dir, line);
                        assert_eq!(found, name, "{document}: `{line}`");
                        from_clone.push(name.to_owned());
                    } else if let Some(address) = toml_value(line, "git") {
                        assert_eq!(address, workspace.repository, "{document}: `{line}`");
                    } else {
                        continue;
                    }
                    let package = workspace.package(name, line);
                    let import = key.replace('-', "_");
                    assert_eq!(
                        Some(import.as_str()),
                        package.lib.as_deref(),
                        "{document}: `{line}`: the dependency is named as its library"
                    );
                }
                _ => {}
            }
        }
    }
    from_clone
}

#[test]
fn the_install_lines_name_what_the_workspace_declares() {
    let workspace = Workspace::read();
    assert!(
        workspace.repository.starts_with("https://"),
        "{}",
        workspace.repository
    );
    for (document, own) in DOCUMENTS {
        let installed = check(&workspace, document);
        match own {
            Some(package) => assert!(
                installed.iter().any(|p| p == package),
                "{document} shows no way to install {package} from a clone (it shows {installed:?})"
            ),
            None => {
                for package in ["redlock-quorum", "redlock-cli", "redlock-sim"] {
                    assert!(
                        installed.iter().any(|p| p == package),
                        "{document} shows no way to install {package} from a clone"
                    );
                }
            }
        }
    }
}

/// The messages of the library and the command point to this section by name.
#[test]
fn the_section_the_quarantine_messages_point_to_exists() {
    let workspace = Workspace::read();
    let operations = std::fs::read_to_string(workspace.root.join("docs/operations.md")).unwrap();
    assert!(
        operations
            .lines()
            .any(|line| line == "## Persistence and restarts"),
        "docs/operations.md lost its section \"Persistence and restarts\""
    );
}

#[test]
fn lines_that_would_not_work_are_caught() {
    let workspace = Workspace::read();
    let good = "```sh\ngit clone https://github.com/redlock-quorum/redlock-quorum\n\
                cargo install --path cli   # the `redlock` command\n```\n\
                ```toml\nredlock = { package = \"redlock-quorum\", path = \"../redlock-quorum/redlock\" }\n```\n\
                ```sh\n# published form: not on crates.io yet\ncargo install redlock-cli\n```\n";
    let good = good.replace(
        "https://github.com/redlock-quorum/redlock-quorum",
        &workspace.repository,
    );
    assert_eq!(
        check_text(&workspace, "good.md", &good),
        ["redlock-cli", "redlock-quorum"]
    );
    for bad in [
        "```sh\ncargo install redlock-cli\n```\n",
        "```sh\ncargo install --path clii\n```\n",
        "```sh\ncargo install --path redlock/core\n```\n",
        "```sh\ncargo install --path cli   # the `redlock-cli` binary\n```\n",
        "```sh\ncargo add --path ../redlock-quorum/redlock --rename redlock_quorum\n```\n",
        "```sh\ngit clone https://example.com/redlock-quorum\n```\n",
        "```toml\nredlock = { package = \"redlock-quorum\", path = \"../redlock-quorum/redlok\" }\n```\n",
        "```toml\nredlock = { package = \"redlock-core\", path = \"../redlock-quorum/redlock\" }\n```\n",
        "```toml\nredlock = { package = \"redlock-quorum\", path = \"../elsewhere/redlock\" }\n```\n",
        "```toml\nredlock = { package = \"redlock-quorum\", git = \"https://example.com/x\" }\n```\n",
        "```toml\nlock = { package = \"redlock-quorum\", git = \"https://example.com/x\" }\n```\n",
        "```sh\n# published form: not on crates.io yet\ncargo install redlock-tests\n```\n",
    ] {
        let caught = std::panic::catch_unwind(|| {
            check_text(&workspace, "bad.md", bad);
        });
        assert!(caught.is_err(), "passed: {bad}");
    }
}
