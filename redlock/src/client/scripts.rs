//! The Lua scripts that make release and extension conditional on ownership.
//!
//! Each runs atomically on the node, so no other client can slip in between the check and
//! the change. `redis::Script` sends `EVALSHA` and falls back to loading the script when the
//! node answers `NOSCRIPT` (a node that restarted has an empty script cache).

use std::sync::LazyLock;

use redis::Script;

/// Deletes the key only if it holds our token.
///
/// `KEYS[1]` the lock key, `ARGV[1]` our token.
/// Returns 1 when deleted, 0 when the key does not exist, -1 when another token holds it.
const RELEASE_SOURCE: &str = r"
local value = redis.call('GET', KEYS[1])
if value == ARGV[1] then
    return redis.call('DEL', KEYS[1])
elseif value == false then
    return 0
end
return -1
";

/// Resets the key's expiry only if it holds our token. A missing key stays missing: an
/// extension must never re-create a lock that expired (someone else may own it by now).
///
/// `KEYS[1]` the lock key, `ARGV[1]` our token, `ARGV[2]` the new TTL in milliseconds.
/// Returns 1 when extended, 0 when the key does not exist, -1 when another token holds it.
const EXTEND_SOURCE: &str = r"
local value = redis.call('GET', KEYS[1])
if value == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
elseif value == false then
    return 0
end
return -1
";

pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_SOURCE));
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(EXTEND_SOURCE));
