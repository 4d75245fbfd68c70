//! Where one reply ends in a stream of RESP2 and RESP3 replies, and what it says: the
//! client's own connections (`socket.rs`) read into a buffer of their own, find each complete
//! reply in it ([`reply_len`]) and read it as redis-rs' [`Value`] ([`parse`]).
//!
//! The replies the lock commands get (`OK`, an integer, a bulk string, a null, an array of
//! those) are read here; every other (errors, and RESP3's maps, sets, doubles and the rest)
//! by redis-rs' parser, [`redis::parse_redis_value`]. That parser is made for a stream: each
//! call sets up a decoder with a zeroed read buffer of its own, which cost more than the rest
//! of the connection's work per reply together (measured: docs/benchmarks.md).

use redis::{ErrorKind, RedisError, RedisResult, Value};

/// The length of the first complete reply at the start of `buf`, or `None` while its end has
/// not arrived. A reply's header that is no RESP type, or a length that is no number, is an
/// error: the connection's stream can no longer be read.
///
/// Only the headers are read: a bulk string's bytes are skipped by its length, so a payload
/// may hold any bytes.
pub(crate) fn reply_len(buf: &[u8]) -> Result<Option<usize>, RedisError> {
    let mut at = 0;
    // Values still to be read before the reply ends (an aggregate adds its elements).
    let mut pending: u64 = 1;
    while pending > 0 {
        // Judged as soon as it arrives: a stream that is not RESP fails at its first byte,
        // not when a line end that may never come arrives.
        let Some(&kind) = buf.get(at) else {
            return Ok(None);
        };
        if !b"+-:_,#($!=*~>%|".contains(&kind) {
            return Err(malformed("a reply of no RESP type"));
        }
        let Some(line) = line_at(buf, at) else {
            return Ok(None);
        };
        let header = &buf[at + 1..line];
        at = line + 2;
        pending -= 1;
        match kind {
            // Simple string, error, integer, null, double, boolean, big number.
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {}
            // Bulk string, bulk error, verbatim string: the bytes and their CRLF.
            b'$' | b'!' | b'=' => {
                if let Some(len) = length(header)? {
                    let end = at.saturating_add(len).saturating_add(2);
                    if buf.len() < end {
                        return Ok(None);
                    }
                    if &buf[end - 2..end] != b"\r\n" {
                        return Err(malformed("a bulk string longer than its length"));
                    }
                    at = end;
                }
            }
            // Array, set, push: their elements.
            b'*' | b'~' | b'>' => pending = more(pending, length(header)?, 1)?,
            // Map: a key and a value per entry.
            b'%' => pending = more(pending, length(header)?, 2)?,
            // Attribute: its entries, then the value it annotates.
            b'|' => pending = more(pending, length(header)?, 2)?.saturating_add(1),
            _ => unreachable!("a type judged above"),
        }
    }
    Ok(Some(at))
}

/// How deep a value may be nested (the reply itself at depth 1): redis-rs' parser refuses
/// deeper ones, and so, by leaving them to it, does [`parse_common`], which reads an array's
/// elements by recursion: without a bound, a peer that sends arrays in arrays overflows the
/// reader's stack (an abort, not an error).
const MAX_DEPTH: usize = 100;

/// The value of `reply`, one whole reply as [`reply_len`] delimits it, as redis-rs' parser
/// reads it.
pub(crate) fn parse(reply: &[u8]) -> RedisResult<Value> {
    match parse_common(reply, 1) {
        Some((value, len)) if len == reply.len() => Ok(value),
        _ => redis::parse_redis_value(reply),
    }
}

/// The value at the start of `reply`, at nesting depth `depth`, and its length, if it is of
/// the kinds read here (see the module's comment) and nested no deeper than [`MAX_DEPTH`];
/// `None` for any other, which redis-rs' parser reads (or refuses).
fn parse_common(reply: &[u8], depth: usize) -> Option<(Value, usize)> {
    if depth > MAX_DEPTH {
        return None;
    }
    let line = line_at(reply, 0)?;
    let header = reply.get(1..line)?;
    let after = line + 2;
    let value = match reply.first()? {
        b'+' if header == b"OK" => Value::Okay,
        b'+' => Value::SimpleString(std::str::from_utf8(header).ok()?.to_owned()),
        b':' => Value::Int(std::str::from_utf8(header).ok()?.parse().ok()?),
        b'_' => Value::Nil,
        b'$' | b'*' if header == b"-1" => Value::Nil,
        b'$' => {
            let len: usize = std::str::from_utf8(header).ok()?.parse().ok()?;
            let bytes = reply.get(after..after.checked_add(len)?)?;
            return Some((Value::BulkString(bytes.to_vec()), after + len + 2));
        }
        b'*' => {
            let count: usize = std::str::from_utf8(header).ok()?.parse().ok()?;
            let mut items = Vec::with_capacity(count.min(64));
            let mut at = after;
            for _ in 0..count {
                let (item, len) = parse_common(reply.get(at..)?, depth + 1)?;
                items.push(item);
                at += len;
            }
            return Some((Value::Array(items), at));
        }
        _ => return None,
    };
    Some((value, after))
}

/// Packs one command into `out` as redis-rs packs a [`redis::Cmd`]: an array of bulk
/// strings, one per argument, where an argument may be given in parts (written one after
/// the other, as one bulk string). The buffer grows once, by the command's whole length.
pub(crate) fn pack(out: &mut Vec<u8>, args: &[&[&[u8]]]) {
    let mut len = 1 + digits(args.len()) + 2;
    for parts in args {
        let arg: usize = parts.iter().map(|part| part.len()).sum();
        len += 1 + digits(arg) + 2 + arg + 2;
    }
    out.reserve(len);
    push_array(out, args.len());
    for parts in args {
        push_bulk(out, parts);
    }
}

/// The start of a command of `count` arguments whose first arguments are `first`, packed as
/// [`pack`] packs them: for a call whose first arguments never change, packed once.
pub(crate) fn head(count: usize, first: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    push_array(&mut out, count);
    for arg in first {
        push_bulk(&mut out, &[arg]);
    }
    out
}

/// Writes the header of an array of `count` bulk strings (a command of `count` arguments).
fn push_array(out: &mut Vec<u8>, count: usize) {
    out.push(b'*');
    push_decimal(out, count);
    out.extend_from_slice(b"\r\n");
}

/// Writes one argument, given in `parts` (written one after the other), as a bulk string.
pub(crate) fn push_bulk(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|part| part.len()).sum();
    out.push(b'$');
    push_decimal(out, len);
    out.extend_from_slice(b"\r\n");
    for part in parts {
        out.extend_from_slice(part);
    }
    out.extend_from_slice(b"\r\n");
}

/// How many decimal digits `n` takes.
fn digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Writes `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, n: usize) {
    let mut digits = [0u8; 20];
    out.extend_from_slice(decimal(n as u64, &mut digits));
}

/// `n` in decimal, written at the end of `digits`.
pub(crate) fn decimal(n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            return &digits[at..];
        }
    }
}

/// The index of the CRLF that ends the line starting at `at`, if it has arrived.
fn line_at(buf: &[u8], at: usize) -> Option<usize> {
    let mut from = at;
    loop {
        let cr = from + buf.get(from..)?.iter().position(|&byte| byte == b'\r')?;
        match buf.get(cr + 1) {
            Some(b'\n') => return Some(cr),
            Some(_) => from = cr + 1,
            None => return None,
        }
    }
}

/// A header's length or count; `None` for a null (`-1`).
fn length(header: &[u8]) -> Result<Option<usize>, RedisError> {
    if header == b"-1" {
        return Ok(None);
    }
    std::str::from_utf8(header)
        .ok()
        .and_then(|text| text.parse::<usize>().ok())
        .map(Some)
        .ok_or_else(|| malformed("a length that is not a number"))
}

/// `pending` with `count` entries of `per` values each to read.
fn more(pending: u64, count: Option<usize>, per: u64) -> Result<u64, RedisError> {
    let count = count.unwrap_or(0) as u64;
    count
        .checked_mul(per)
        .and_then(|values| values.checked_add(pending))
        .ok_or_else(|| malformed("an aggregate too large to read"))
}

fn malformed(what: &'static str) -> RedisError {
    RedisError::from((
        ErrorKind::Parse,
        "a node's reply cannot be read",
        what.to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_reply_nested_past_the_parsers_depth_is_an_error_not_a_crash() {
        // Arrays in arrays, 200,000 deep: a peer that is not Redis can send it. Read by
        // recursion without a bound, it overflowed the reader's stack and aborted the
        // process.
        let mut reply = b"*1\r\n".repeat(200_000);
        reply.extend_from_slice(b":1\r\n");
        assert_eq!(reply_len(&reply).unwrap(), Some(reply.len()));
        let err = parse(&reply).unwrap_err();
        assert!(err.to_string().contains("recursion depth"), "{err}");
        // As deep as redis-rs' parser reads (the integer at depth 100), it is read; a level
        // more is refused.
        let mut reply = b"*1\r\n".repeat(MAX_DEPTH);
        reply.extend_from_slice(b":1\r\n");
        assert!(parse(&reply).is_err());
        let mut value = parse(&reply[4..]).unwrap();
        for _ in 1..MAX_DEPTH {
            let Value::Array(mut items) = value else {
                panic!("{value:?}")
            };
            value = items.pop().unwrap();
        }
        assert_eq!(value, Value::Int(1));
    }

    #[test]
    fn each_type_of_reply_ends_where_it_ends() {
        let replies: [&[u8]; 12] = [
            b"+OK\r\n",
            b"-ERR wrong\r\n",
            b":42\r\n",
            b"$5\r\nhe\r\nl\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*2\r\n$1\r\na\r\n:1\r\n",
            b"*2\r\n*1\r\n+x\r\n*0\r\n",
            b"%1\r\n+k\r\n$1\r\nv\r\n",
            b">2\r\n+message\r\n+x\r\n",
            b"|1\r\n+ttl\r\n:3\r\n+value\r\n",
            b"=7\r\ntxt:abc\r\n",
        ];
        for reply in replies {
            let mut stream = reply.to_vec();
            stream.extend_from_slice(b":7\r\n");
            assert_eq!(reply_len(&stream).unwrap(), Some(reply.len()), "{reply:?}");
            for cut in 0..reply.len() {
                assert_eq!(
                    reply_len(&reply[..cut]).unwrap(),
                    None,
                    "{reply:?} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn replies_of_other_kinds_are_read_by_redis_rs() {
        for reply in [
            &b"-ERR wrong\r\n"[..],
            b"%1\r\n+k\r\n$1\r\nv\r\n",
            b"*2\r\n:1\r\n-NOSCRIPT gone\r\n",
            b",1.5\r\n",
            b"#t\r\n",
        ] {
            assert!(parse_common(reply, 1).is_none(), "{reply:?}");
            assert_eq!(
                parse(reply).unwrap(),
                redis::parse_redis_value(reply).unwrap()
            );
        }
    }

    #[test]
    fn a_reply_of_no_type_or_with_a_bad_length_is_an_error() {
        assert!(reply_len(b"?what\r\n").is_err());
        // Without a line end: judged at the first byte.
        assert!(reply_len(b"\x00\xff\xfe").is_err());
        assert!(reply_len(b"$x\r\n").is_err());
        assert!(reply_len(b"*-2\r\n").is_err());
        assert!(reply_len(b"$1\r\nab\r\n").is_err());
        assert!(reply_len(b"\r\n").is_err());
    }

    /// A RESP encoding of a random value, nested up to three deep.
    fn encoded() -> impl Strategy<Value = Vec<u8>> {
        let leaf = prop_oneof![
            "[a-zA-Z ]{0,12}".prop_map(|s| format!("+{s}\r\n").into_bytes()),
            Just(b"+OK\r\n".to_vec()),
            any::<i64>().prop_map(|n| format!(":{n}\r\n").into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(|bytes| {
                let mut out = format!("${}\r\n", bytes.len()).into_bytes();
                out.extend_from_slice(&bytes);
                out.extend_from_slice(b"\r\n");
                out
            }),
            Just(b"$-1\r\n".to_vec()),
            Just(b"_\r\n".to_vec()),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            proptest::collection::vec(inner, 0..4).prop_map(|items| {
                let mut out = format!("*{}\r\n", items.len()).into_bytes();
                for item in items {
                    out.extend_from_slice(&item);
                }
                out
            })
        })
    }

    proptest! {
        /// A command packed here is the bytes redis-rs packs for it.
        #[test]
        fn a_command_is_packed_as_redis_rs_packs_it(
            args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..30), 1..9),
            split in 0usize..30,
        ) {
            let mut cmd = redis::Cmd::new();
            for arg in &args {
                cmd.arg(&arg[..]);
            }
            // Each argument in two parts, cut at `split`.
            let parts: Vec<[&[u8]; 2]> = args
                .iter()
                .map(|arg| {
                    let (head, tail) = arg.split_at(split.min(arg.len()));
                    [head, tail]
                })
                .collect();
            let parts: Vec<&[&[u8]]> = parts.iter().map(|pair| &pair[..]).collect();
            let mut packed = Vec::new();
            pack(&mut packed, &parts);
            prop_assert_eq!(packed, cmd.get_packed_command());
        }

        #[test]
        fn numbers_are_written_in_decimal(n in any::<usize>()) {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            prop_assert_eq!(out, n.to_string().into_bytes());
            prop_assert_eq!(digits(n), n.to_string().len());
        }

        /// Any reply ends exactly where its encoding does, whatever follows it, and no cut
        /// of it is taken for a whole one; redis-rs parses what it delimits.
        #[test]
        fn a_reply_is_delimited_exactly(reply in encoded(), next in encoded()) {
            let mut stream = reply.clone();
            stream.extend_from_slice(&next);
            prop_assert_eq!(reply_len(&stream).unwrap(), Some(reply.len()));
            for cut in 0..reply.len() {
                prop_assert_eq!(reply_len(&reply[..cut]).unwrap(), None);
            }
            prop_assert!(redis::parse_redis_value(&reply).is_ok());
        }

        /// What is read here is what redis-rs' parser reads, for every kind read here.
        #[test]
        fn a_reply_reads_as_redis_rs_reads_it(reply in encoded()) {
            prop_assert_eq!(parse(&reply).unwrap(), redis::parse_redis_value(&reply).unwrap());
            prop_assert!(parse_common(&reply, 1).is_some());
        }
    }
}
