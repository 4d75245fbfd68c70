//! The house rules that a reviewer would otherwise count by hand:
//!
//! - every `*.rs` file at the top of `tests/` and `benches/` is a target of its
//!   `Cargo.toml` (both packages set `autotests`/`autobenches = false` and list their
//!   targets by hand, so a file left out would silently never run);
//! - no product source file is over 1,000 lines, and no product function over 100 lines
//!   (docs/architecture.md, "House rules"), except the functions listed in
//!   [`LONG_FUNCTIONS`] (none today), which may only shrink.
//!
//! Each rule is checked on the repository and, beside it, on a made-up case it must refuse.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root: this package lives in `tests/`.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The `path` of every target (`[lib]`, `[[test]]`, `[[bench]]`, `[[bin]]`, `[[example]]`)
/// of a manifest.
fn target_paths(manifest: &str) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    let mut in_target = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_target = line == "[lib]" || line.starts_with("[[");
        } else if in_target && let Some(value) = line.strip_prefix("path") {
            let value = value.trim_start().trim_start_matches('=').trim();
            paths.insert(value.trim_matches('"').to_owned());
        }
    }
    paths
}

/// The `*.rs` files at the top of `dir` that no target of `dir/Cargo.toml` names.
fn unlisted(dir: &Path) -> Vec<String> {
    let manifest = fs::read_to_string(dir.join("Cargo.toml")).expect("read Cargo.toml");
    let listed = target_paths(&manifest);
    let mut files: Vec<String> = fs::read_dir(dir)
        .expect("read the package directory")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.is_file() && path.extension().is_some_and(|e| e == "rs"))
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|file| !listed.contains(file))
        .collect();
    files.sort();
    files
}

#[test]
fn every_test_and_bench_file_is_a_target_of_its_manifest() {
    for package in ["tests", "benches"] {
        let missing = unlisted(&root().join(package));
        assert!(
            missing.is_empty(),
            "{package}/Cargo.toml lists no target for {missing:?}: add a [[test]] or [[bench]] entry"
        );
    }
}

#[test]
fn a_file_without_a_target_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = fs::read_to_string(root().join("tests/Cargo.toml")).unwrap();
    fs::write(dir.path().join("Cargo.toml"), &manifest).unwrap();
    for listed in target_paths(&manifest) {
        if !listed.contains('/') {
            fs::write(dir.path().join(listed), "").unwrap();
        }
    }
    assert_eq!(unlisted(dir.path()), Vec::<String>::new());
    fs::write(dir.path().join("new_subject.rs"), "").unwrap();
    assert_eq!(unlisted(dir.path()), ["new_subject.rs"]);
    // An entry taken out of the manifest leaves its file unlisted too.
    let without = manifest.replace("path = \"blocking.rs\"", "");
    fs::write(dir.path().join("Cargo.toml"), without).unwrap();
    assert_eq!(unlisted(dir.path()), ["blocking.rs", "new_subject.rs"]);
}

/// The longest a product source file may be.
const MAX_FILE_LINES: usize = 1_000;
/// The longest a product function may be.
const MAX_FUNCTION_LINES: usize = 100;

/// Product functions allowed over [`MAX_FUNCTION_LINES`] until they are split, as (file,
/// function, its length when listed): each may shrink but not grow, and an entry must go
/// once its function is short enough. Empty: every product function is within the limit.
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[];

/// The directories of product code: what ships in the published packages and binaries.
const PRODUCT: &[&str] = &[
    "redlock/src",
    "redlock/core/src",
    "cli/src",
    "simulator/src",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read a source directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The product part of a source file: its lines before the inline test module.
fn product_lines(source: &str) -> Vec<&str> {
    let lines: Vec<&str> = source.lines().collect();
    let tests = lines
        .windows(2)
        .position(|pair| {
            pair[0].trim() == "#[cfg(test)]" && pair[1].trim_start().starts_with("mod ")
        })
        .unwrap_or(lines.len());
    lines[..tests].to_vec()
}

/// Each function of a rustfmt-formatted file as (name, lines from `fn` to its closing
/// brace at the same indentation, both counted).
fn functions(lines: &[&str]) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = line.len() - code.len();
        let signature = [
            "pub ",
            "pub(crate) ",
            "pub(super) ",
            "async ",
            "const ",
            "unsafe ",
        ]
        .iter()
        .fold(code, |rest, word| rest.strip_prefix(word).unwrap_or(rest));
        let Some(after) = signature.strip_prefix("fn ") else {
            continue;
        };
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if code.contains('{') && code.ends_with('}') {
            found.push((name, 1));
            continue;
        }
        let closing = format!("{}}}", " ".repeat(indent));
        let end = lines[start..].iter().position(|l| {
            *l == closing
                || (l.ends_with(';')
                    && l.len() - l.trim_start().len() == indent
                    && !l.contains('{'))
        });
        if let Some(end) = end {
            found.push((name, end + 1));
        }
    }
    found
}

/// Every breach of the two limits under `root`, allowing `allowed` as they stand.
fn breaches(root: &Path, allowed: &[(&str, &str, usize)]) -> Vec<String> {
    let mut files = Vec::new();
    for dir in PRODUCT {
        let dir = root.join(dir);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
    }
    // Test modules in files of their own.
    files.retain(|path| !path.ends_with("tests.rs") && !path.ends_with("proptests.rs"));
    files.sort();
    let mut found = Vec::new();
    for path in files {
        let relative = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let source = fs::read_to_string(&path).expect("read a source file");
        let lines = product_lines(&source);
        if lines.len() > MAX_FILE_LINES {
            found.push(format!(
                "{relative}: {} lines (at most {MAX_FILE_LINES})",
                lines.len()
            ));
        }
        for (name, length) in functions(&lines) {
            let limit = allowed
                .iter()
                .find(|(file, function, _)| *file == relative && *function == name)
                .map_or(MAX_FUNCTION_LINES, |(_, _, now)| *now);
            if length > limit {
                found.push(format!(
                    "{relative}: fn {name} is {length} lines (at most {limit})"
                ));
            }
        }
    }
    found
}

#[test]
fn no_product_file_or_function_is_over_its_limit() {
    let found = breaches(&root(), LONG_FUNCTIONS);
    assert!(found.is_empty(), "split these:\n{}", found.join("\n"));
}

/// The entries of `allowed` under `root` that no longer name a function over
/// [`MAX_FUNCTION_LINES`] (split, renamed or gone with their file): they must leave the list,
/// or the function could grow back up to its old length unnoticed.
fn stale_entries<'a>(
    root: &Path,
    allowed: &'a [(&'a str, &'a str, usize)],
) -> Vec<&'a (&'a str, &'a str, usize)> {
    allowed
        .iter()
        .filter(|(file, function, _)| {
            let Ok(source) = fs::read_to_string(root.join(file)) else {
                return true;
            };
            !functions(&product_lines(&source))
                .iter()
                .any(|(name, length)| name == function && *length > MAX_FUNCTION_LINES)
        })
        .collect()
}

#[test]
fn a_listed_long_function_that_is_now_short_enough_leaves_the_list() {
    let stale = stale_entries(&root(), LONG_FUNCTIONS);
    assert!(
        stale.is_empty(),
        "no longer over the limit, take out of LONG_FUNCTIONS: {stale:?}"
    );
}

#[test]
fn a_listed_function_no_longer_over_the_limit_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("cli/src");
    fs::create_dir_all(&src).unwrap();
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let source = format!(
        "fn short() {{\n{}}}\n\nfn long() {{\n{}}}\n",
        body(10),
        body(MAX_FUNCTION_LINES)
    );
    fs::write(src.join("a.rs"), &source).unwrap();
    let long = ("cli/src/a.rs", "long", MAX_FUNCTION_LINES + 2);
    let short = ("cli/src/a.rs", "short", MAX_FUNCTION_LINES + 2);
    let gone = ("cli/src/gone.rs", "long", MAX_FUNCTION_LINES + 2);
    let allowed = [long, short, gone];
    assert_eq!(stale_entries(dir.path(), &allowed), [&short, &gone]);
    // Once split below the limit, the long one goes stale too.
    fs::write(
        src.join("a.rs"),
        source.replace(&body(MAX_FUNCTION_LINES), &body(10)),
    )
    .unwrap();
    assert_eq!(stale_entries(dir.path(), &allowed), [&long, &short, &gone]);
}

#[test]
fn a_long_file_or_function_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("cli/src");
    fs::create_dir_all(&src).unwrap();
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let source = format!(
        "fn short() {{\n{}}}\n\npub(crate) async fn long() {{\n{}}}\n\n#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{}    }}\n}}\n",
        body(10),
        body(MAX_FUNCTION_LINES - 1),
        body(500)
    );
    fs::write(src.join("a.rs"), &source).unwrap();
    assert_eq!(
        breaches(dir.path(), &[]),
        [format!(
            "cli/src/a.rs: fn long is {} lines (at most {MAX_FUNCTION_LINES})",
            MAX_FUNCTION_LINES + 1
        )]
    );
    assert_eq!(
        breaches(
            dir.path(),
            &[("cli/src/a.rs", "long", MAX_FUNCTION_LINES + 1)]
        ),
        Vec::<String>::new()
    );
    fs::write(src.join("b.rs"), "// a line\n".repeat(MAX_FILE_LINES + 1)).unwrap();
    assert_eq!(
        breaches(
            dir.path(),
            &[("cli/src/a.rs", "long", MAX_FUNCTION_LINES + 1)]
        ),
        [format!(
            "cli/src/b.rs: {} lines (at most {MAX_FILE_LINES})",
            MAX_FILE_LINES + 1
        )]
    );
}
