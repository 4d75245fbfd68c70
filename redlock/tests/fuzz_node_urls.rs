//! Fuzzing node URLs: `Redlock::builder().node(url).build()` never panics for any string,
//! and a password in a URL never appears in an error, a `Debug` output or an address.
//!
//! `PROPTEST_CASES` sets the number of cases per property (default 512); see
//! `docs/reliability.md` for the long run.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use proptest::prelude::*;
use redlock::Redlock;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Everything the client can show about itself after `build`, success or failure.
fn everything_shown(url: &str) -> String {
    match Redlock::builder().node(url).build() {
        Ok(redlock) => {
            let addresses: Vec<&str> = redlock.node_addresses().collect();
            format!("{redlock:?} {addresses:?}")
        }
        Err(e) => format!("{e} {e:?}"),
    }
}

/// Schemes, right and wrong.
fn scheme() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "redis://",
        "rediss://",
        "redis+unix://",
        "unix://",
        "valkey://",
        "http://",
        "redis:",
        "redis:/",
        "",
    ])
}

/// A password: a marker that appears nowhere else, then characters that are allowed,
/// reserved or plain wrong in a URL's user-info.
fn password() -> impl Strategy<Value = String> {
    "[A-Za-z0-9!$&'()*+,;=._~%@/?#:\\[\\] -]{4,24}".prop_map(|tail| format!("Pw!{tail}"))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_string_builds_or_is_refused_without_panicking(url in any::<String>()) {
        let _ = everything_shown(&url);
    }

    #[test]
    fn url_shaped_strings_build_or_are_refused_without_panicking(
        scheme in scheme(),
        rest in "[a-zA-Z0-9:/@?#&=%.\\[\\]_~+ -]{0,60}",
    ) {
        let _ = everything_shown(&format!("{scheme}{rest}"));
    }

    #[test]
    fn a_password_in_the_user_info_never_shows(
        scheme in scheme(),
        user in "[a-z]{0,8}",
        password in password(),
        host in "(127\\.0\\.0\\.1|localhost|\\[::1\\]|[a-z0-9.-]{0,12}|\\[bad)",
        port in prop::option::of("[0-9]{1,6}"),
        tail in "(/[0-9]{0,2})?(\\?[a-z]{1,8}=[a-z0-9]{0,4})?",
    ) {
        let port = port.map(|p| format!(":{p}")).unwrap_or_default();
        let url = format!("{scheme}{user}:{password}@{host}{port}{tail}");
        let shown = everything_shown(&url);
        prop_assert!(!shown.contains(&password), "{url:?} showed its password: {shown}");
    }

    #[test]
    fn a_password_in_the_query_never_shows(
        scheme in scheme(),
        base in "(127\\.0\\.0\\.1:6379|/run/redis\\.sock|[a-z0-9.:/-]{0,16})",
        name in prop::sample::select(vec!["pass", "password", "PASS", "Password"]),
        password in password(),
        other in "(&db=[0-9])?",
    ) {
        let url = format!("{scheme}{base}?{name}={password}{other}");
        let shown = everything_shown(&url);
        prop_assert!(!shown.contains(&password), "{url:?} showed its password: {shown}");
    }
}

#[test]
fn the_generators_reach_both_outcomes() {
    // A fuzzer that only ever produced refused URLs would prove little about the others.
    let built = Redlock::builder()
        .node("redis://user:Pw!x@127.0.0.1:6379/0")
        .build();
    assert!(built.is_ok());
    let refused = Redlock::builder().node("redis://user:Pw!x@[bad").build();
    assert!(refused.is_err());
}
