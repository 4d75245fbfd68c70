//! The scripts run on the protected Redis target by [`crate::fencing::FencedKey`]: the token
//! check and the access, atomically.
//!
//! Sent with `EVAL`, like every script of the crate (see [`crate::lua`]).

use super::LuaScript;

/// Writes `ARGV[3]` to `KEYS[1]` unless the fence `ARGV[1]` is below the highest in `KEYS[2]`,
/// or equal to it but from another lease than the owner token in `KEYS[3]`; registers the
/// fence and its owner `ARGV[2]`. Returns `{1, fence}` when written, `{0, highest}` when
/// rejected, `{2, highest}` when another lease already used this fence (a repeated token).
/// A fence registered without an owner (by an earlier version) accepts the first owner.
const WRITE_SOURCE: &str = r"
local highest = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < highest then
    return {0, highest}
end
if token == highest then
    local owner = redis.call('GET', KEYS[3])
    if owner and owner ~= ARGV[2] then
        return {2, highest}
    end
end
if token > highest then
    redis.call('SET', KEYS[2], ARGV[1])
end
redis.call('SET', KEYS[3], ARGV[2])
redis.call('SET', KEYS[1], ARGV[3])
return {1, token}
";

/// Reads `KEYS[1]` under the same check as the write, and registers the fence `ARGV[1]` and
/// its owner `ARGV[2]` the same way. Returns `{1, value}` (value may be nil), `{0, highest}`
/// when rejected, `{2, highest}` when another lease already used this fence.
const READ_SOURCE: &str = r"
local highest = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < highest then
    return {0, highest}
end
if token == highest then
    local owner = redis.call('GET', KEYS[3])
    if owner and owner ~= ARGV[2] then
        return {2, highest}
    end
end
if token > highest then
    redis.call('SET', KEYS[2], ARGV[1])
end
redis.call('SET', KEYS[3], ARGV[2])
return {1, redis.call('GET', KEYS[1])}
";

// Sent whole with `EVAL`: one command per access, whatever the target's script cache holds.
pub(crate) static WRITE: LuaScript = LuaScript::new(WRITE_SOURCE);
pub(crate) static READ: LuaScript = LuaScript::new(READ_SOURCE);
