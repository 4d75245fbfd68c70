//! The scripts run on the protected Redis target by [`crate::fencing::FencedKey`]: the token
//! check and the access, atomically.
//!
//! Sent with `EVAL`, like every script of the crate (see [`crate::lua`]).

use super::LuaScript;

/// The check both accesses make, and the fence registration that follows it: returns
/// `{0, highest}` when the fence `ARGV[1]` is below the highest in `KEYS[2]`, `{2, highest}`
/// when it equals it but another lease than the owner `ARGV[2]` (in `KEYS[3]`) used it (a
/// repeated token); otherwise registers the fence and its owner and falls through to the
/// access. A fence registered without an owner (by an earlier version) accepts the first
/// owner. A macro, not a constant, so that `concat!` can join it to each access at compile
/// time: one copy of the check, two whole scripts.
macro_rules! fence_check {
    () => {
        r"
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
"
    };
}

/// Writes `ARGV[3]` to `KEYS[1]` past the fence check above: `{1, fence}` when
/// written.
const WRITE_SOURCE: &str = concat!(
    fence_check!(),
    r"redis.call('SET', KEYS[1], ARGV[3])
return {1, token}
"
);

/// Reads `KEYS[1]` past the same fence check: `{1, value}` (value may be nil).
const READ_SOURCE: &str = concat!(
    fence_check!(),
    r"return {1, redis.call('GET', KEYS[1])}
"
);

// Sent whole with `EVAL`: one command per access, whatever the target's script cache holds.
pub(crate) static WRITE: LuaScript = LuaScript::new(WRITE_SOURCE);
pub(crate) static READ: LuaScript = LuaScript::new(READ_SOURCE);
