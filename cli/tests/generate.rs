//! `redlock completions SHELL` and `redlock man [COMMAND]` on the built binary: what a
//! package's build or a user's install step runs.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::process::Stdio;

use common::*;

#[test]
fn completions_and_man_pages_go_to_stdout() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let done = finish(redlock().args(["completions", shell]));
        assert_eq!(done.code, Some(0), "{shell}: {}", done.text());
        assert!(done.stderr.is_empty(), "{shell}: {}", done.text());
        for word in ["redlock", "run", "status", "doctor", "restart-quarantine"] {
            assert!(done.stdout.contains(word), "{shell}: no {word}");
        }
    }
    let done = finish(redlock().arg("man"));
    assert_eq!(done.code, Some(0), "{}", done.text());
    assert!(done.stdout.contains(".TH redlock 1"), "{}", done.text());
    let done = finish(redlock().args(["man", "run"]));
    assert_eq!(done.code, Some(0), "{}", done.text());
    assert!(done.stdout.contains(".TH redlock-run 1"), "{}", done.text());
    assert!(
        done.stdout.contains("\\-\\-kill\\-after"),
        "{}",
        done.text()
    );
}

#[test]
fn an_unknown_shell_or_command_is_a_usage_error() {
    let done = finish(redlock().args(["completions", "tcsh"]));
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(
        done.stderr.contains("possible values: bash"),
        "{}",
        done.text()
    );
    let done = finish(redlock().args(["man", "lock"]));
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(
        done.stderr.contains("possible values: run"),
        "{}",
        done.text()
    );
}

#[test]
fn a_reader_that_stopped_is_not_an_error() {
    // `redlock man | head -0`: the pipe's reader is gone before the first write, so every
    // write fails with EPIPE (Rust ignores SIGPIPE): like `cat`, no error and no message.
    let (reader, writer) = nix::unistd::pipe().unwrap();
    drop(reader);
    let output = redlock()
        .arg("man")
        .stdout(Stdio::from(writer))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(output.stderr.is_empty(), "{output:?}");
}
