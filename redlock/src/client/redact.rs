//! Keeps credentials out of messages: node URLs are shown without their passwords.

/// The URL with its user-info and any `pass`/`password` query parameter masked.
///
/// Works on text that may not even parse, since it is used to report URLs that do not, and
/// whose passwords may hold characters that should have been percent-encoded (`/`, `?`,
/// `#`, `@`, `&`). So the user-info is taken to end at the *last* `@`, and a password
/// parameter to run to the end of the text: either can only hide too much, never too
/// little.
pub(crate) fn redact_url(url: &str) -> String {
    let (scheme, rest) = split_scheme(url);
    let rest = match rest.rfind('@') {
        Some(at) => format!("***@{}", &rest[at + 1..]),
        None => rest.to_owned(),
    };
    let Some((before, query)) = rest.split_once('?') else {
        return format!("{scheme}{rest}");
    };
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some((name, _))
                if name.eq_ignore_ascii_case("pass") || name.eq_ignore_ascii_case("password") =>
            {
                kept.push(format!("{name}=***"));
                break;
            }
            _ => kept.push(pair.to_owned()),
        }
    }
    format!("{scheme}{before}?{}", kept.join("&"))
}

/// `("redis://", rest)`, or `("", url)` unless the text starts with a scheme: a `://` inside
/// a password is not one.
fn split_scheme(url: &str) -> (&str, &str) {
    match url.find("://") {
        Some(at)
            if url[..at].starts_with(|c: char| c.is_ascii_alphabetic())
                && url[..at]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            url.split_at(at + 3)
        }
        _ => ("", url),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn masks_credentials() {
        assert_eq!(
            redact_url("redis://user:s3cret@host:6379/0"),
            "redis://***@host:6379/0"
        );
        assert_eq!(redact_url("redis://:s3cret@host"), "redis://***@host");
        assert_eq!(redact_url("redis://host:6379"), "redis://host:6379");
        assert_eq!(
            redact_url("redis+unix:///run/redis.sock?db=1&pass=s3cret"),
            "redis+unix:///run/redis.sock?db=1&pass=***"
        );
        assert_eq!(redact_url("not a url p@ss"), "***@ss");
        assert!(!redact_url("rediss://u:p%40ss@h:1?password=x").contains('x'));
    }

    #[test]
    fn masks_passwords_with_characters_that_should_have_been_encoded() {
        // Found by fuzzing: the user-info used to end at the first `/`, `?` or `#`.
        for url in [
            "redis://:Pw!/A# @127.0.0.1",
            "redis://u:se/cr?et@host:6379/0",
            "redis://u:se#cret@host",
            "redis://u:se@cr@et@host",
        ] {
            let shown = redact_url(url);
            assert!(
                shown.ends_with("@127.0.0.1") || shown.contains("***@host"),
                "{shown}"
            );
            assert!(!shown.contains("cr"), "{url} shows {shown}");
            assert!(!shown.contains("Pw!"), "{url} shows {shown}");
        }
        assert_eq!(
            redact_url("redis+unix:///s.sock?db=1&pass=se&cret&x=1"),
            "redis+unix:///s.sock?db=1&pass=***"
        );
        // Found by the long fuzzing run: a `://` inside the password is not a scheme.
        assert_eq!(
            redact_url("redis:127.0.0.1:6379?pass=Pw!:// "),
            "redis:127.0.0.1:6379?pass=***"
        );
    }
}
