//! Keeps credentials out of messages: node URLs are shown without their passwords.

/// The URL with its user-info and any `pass`/`password` query parameter masked.
///
/// Works on text that may not even parse, since it is used to report URLs that do not.
pub(crate) fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let (authority_end, _) = rest
        .char_indices()
        .find(|&(_, c)| c == '/' || c == '?' || c == '#')
        .unwrap_or((rest.len(), ' '));
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => format!("***@{}", &authority[at + 1..]),
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        None => tail.to_owned(),
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _))
                        if name.eq_ignore_ascii_case("pass")
                            || name.eq_ignore_ascii_case("password") =>
                    {
                        format!("{name}=***")
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
    };
    format!("{scheme}{authority}{tail}")
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
}
