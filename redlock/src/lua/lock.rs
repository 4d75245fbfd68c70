//! The scripts run on the lock nodes: release and extension conditional on ownership, the
//! two phases of a fenced acquisition, and multi-resource leases.
//!
//! Each runs atomically on the node, so no other client can slip in between the check and
//! the change. Every new connection loads them ([`LOADED`]) and then calls them with
//! `EVALSHA` (see [`crate::lua`]).

use super::LuaScript;

/// Deletes the key only if it holds our token, together with its waiters' marks (the hash
/// at `KEYS[2]`, [`MARK_WAITING`]), and then, only if there were marks, tells the key's
/// waiters: a `PUBLISH` of the token on the channel named after the key (so that a client
/// can tell its own releases from others'). A release nobody waits for publishes nothing
/// and costs what a plain compare-and-delete costs, and one `HKEYS` of a missing hash: one
/// `DEL` of both keys, which answers 2 only when the marks were there. The marks go with
/// the release that announced them: a waiter that loses its next round marks again. The
/// `PUBLISH` goes through `redis.pcall`, so that a user whose ACL does not grant the channel
/// still releases (its waiters then wake on their retry timers).
///
/// Before the marks go, it reads whose they are: a waiter's id begins with its client's
/// prefix, as the client's tokens do ([`redlock_core::CLIENT_PREFIX_LEN`] bytes, 8 hex
/// characters), so a field whose first 8 characters differ from the token's is a waiter of
/// another process, and the release answers 2 instead of 1. That is what bounds the
/// client's hand-offs among its own waiters ([`redlock_core::Bypass`]). The `HKEYS` goes
/// through `redis.pcall` too: refused by the user's ACL, its error is a table with no list
/// in it, no mark is read, and the release answers 1 (it still releases; only the bound is
/// lost).
///
/// `KEYS[1]` the lock key, `KEYS[2]` its marks ([`redlock_core::LockKey::wait_key`]),
/// `ARGV[1]` our token.
/// Returns 1 when deleted, 2 when deleted while a waiter of another client had marked it,
/// 0 when the key does not exist, -1 when another token holds it.
const RELEASE_SOURCE: &str = r"
local value = redis.call('GET', KEYS[1])
if value == ARGV[1] then
    local released = 1
    local client = string.sub(ARGV[1], 1, 8)
    for _, waiter in ipairs(redis.pcall('HKEYS', KEYS[2])) do
        if string.sub(waiter, 1, 8) ~= client then
            released = 2
            break
        end
    end
    if redis.call('DEL', KEYS[1], KEYS[2]) == 2 then
        redis.pcall('PUBLISH', KEYS[1], ARGV[1])
    end
    return released
elseif value == false then
    return 0
end
return -1
";

/// A waiter marks its interest in the key's release: field `ARGV[1]` (its id, which begins
/// with its client's prefix, see [`RELEASE`]) in the hash
/// `KEYS[2]`, whose expiry is raised to `ARGV[2]` milliseconds unless it is already later
/// (the hash is shared by every waiter of the key, so a mark never shortens another's; no
/// `PEXPIRE .. GT`, which Redis 6.2 lacks). Then reads the lock key in the same atomic
/// step: a release before the mark announced nothing (and took the marks before it with
/// the key), and the waiter learns of it here.
///
/// `KEYS[1]` the lock key, `KEYS[2]` its marks, `ARGV[1]` the waiter's id, `ARGV[2]` the
/// mark's time to live in milliseconds. Returns the lock key's value (nil when free).
const MARK_WAITING_SOURCE: &str = r"
redis.call('HSET', KEYS[2], ARGV[1], '1')
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return redis.call('GET', KEYS[1])
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

/// `SET NX PX` and a read of the resource's fence counter, atomically: the first phase of a
/// fenced acquisition.
///
/// `KEYS[1]` the lock key, `KEYS[2]` its fence counter key, `ARGV[1]` our token, `ARGV[2]`
/// the TTL in milliseconds. Returns `{1, counter}` when the key was taken, `{0, counter}` when
/// another owner holds it; the counter is 0 when it never existed.
const ACQUIRE_FENCED_SOURCE: &str = r"
local taken = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
if taken then
    return {1, counter}
end
return {0, counter}
";

/// Raises the fence counter to `ARGV[2]` unless it is already higher, only while the lock key
/// still holds our token, and returns the counter afterwards: the second phase of a fenced
/// acquisition. The counter key has no TTL: it must outlive every lease, or tokens could
/// repeat.
///
/// `KEYS[1]` the lock key, `KEYS[2]` the fence counter key, `ARGV[1]` our owner token,
/// `ARGV[2]` the new lease's fencing token. Returns the counter, or -1 when another token
/// holds the lock key and -2 when it is gone (nothing raised then).
const RAISE_FENCE_SOURCE: &str = r"
local owner = redis.call('GET', KEYS[1])
if owner ~= ARGV[1] then
    if owner then
        return -1
    end
    return -2
end
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
local target = tonumber(ARGV[2])
if target > current then
    redis.call('SET', KEYS[2], ARGV[2])
    return target
end
return current
";

/// Takes every key of a multi-resource lease, or none: `SET key token PX ttl` on each key
/// only if none of them exists.
///
/// `KEYS` the lock keys, `ARGV[1]` our token, `ARGV[2]` the TTL in milliseconds.
/// Returns 1 when all were taken, 0 when any existed (nothing is written then).
const ACQUIRE_ALL_SOURCE: &str = r"
for i = 1, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then
        return 0
    end
end
for i = 1, #KEYS do
    redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1
";

/// Deletes each key of a multi-resource lease that still holds our token, with its marks,
/// telling each deleted key's waiters as [`RELEASE`] does (only where some waiter marked
/// that key).
///
/// `KEYS` the `n` lock keys, then their `n` marks in the same order, `ARGV[1]` our token.
/// Returns 1 when at least one key was deleted, -1 when none was but another token holds
/// one, 0 when none holds anything.
const RELEASE_ALL_SOURCE: &str = r"
local released, other = 0, 0
local n = #KEYS / 2
for i = 1, n do
    local value = redis.call('GET', KEYS[i])
    if value == ARGV[1] then
        if redis.call('DEL', KEYS[i], KEYS[n + i]) == 2 then
            redis.pcall('PUBLISH', KEYS[i], ARGV[1])
        end
        released = released + 1
    elseif value then
        other = other + 1
    end
end
if released > 0 then
    return 1
elseif other > 0 then
    return -1
end
return 0
";

/// Resets the expiry of every key of a multi-resource lease, only if every one still holds
/// our token (never re-creating a missing key).
///
/// `KEYS` the lock keys, `ARGV[1]` our token, `ARGV[2]` the TTL in milliseconds.
/// Returns 1 when extended, -1 when another token holds a key, 0 when a key is missing.
const EXTEND_ALL_SOURCE: &str = r"
local missing = false
for i = 1, #KEYS do
    local value = redis.call('GET', KEYS[i])
    if value == false then
        missing = true
    elseif value ~= ARGV[1] then
        return -1
    end
end
if missing then
    return 0
end
for i = 1, #KEYS do
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
";

pub(crate) static RELEASE: LuaScript = LuaScript::new(RELEASE_SOURCE);
pub(crate) static EXTEND: LuaScript = LuaScript::new(EXTEND_SOURCE);
pub(crate) static ACQUIRE_FENCED: LuaScript = LuaScript::new(ACQUIRE_FENCED_SOURCE);
pub(crate) static RAISE_FENCE: LuaScript = LuaScript::new(RAISE_FENCE_SOURCE);
pub(crate) static ACQUIRE_ALL: LuaScript = LuaScript::new(ACQUIRE_ALL_SOURCE);
pub(crate) static RELEASE_ALL: LuaScript = LuaScript::new(RELEASE_ALL_SOURCE);
pub(crate) static EXTEND_ALL: LuaScript = LuaScript::new(EXTEND_ALL_SOURCE);
pub(crate) static MARK_WAITING: LuaScript = LuaScript::new(MARK_WAITING_SOURCE);

/// The scripts a new connection to a lock node loads (`SCRIPT LOAD`) with its
/// identification, so that it can call them by hash.
pub(crate) static LOADED: [&LuaScript; 8] = [
    &RELEASE,
    &EXTEND,
    &ACQUIRE_FENCED,
    &RAISE_FENCE,
    &ACQUIRE_ALL,
    &RELEASE_ALL,
    &EXTEND_ALL,
    &MARK_WAITING,
];
