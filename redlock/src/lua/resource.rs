//! The scripts run on the protected Redis target by [`crate::fencing::FencedKey`]: the token
//! check and the access, atomically.
//!
//! Sent with `EVAL`, like every script of the crate (see [`crate::lua`]).

use super::LuaScript;

/// Writes `ARGV[2]` to `KEYS[1]` unless `ARGV[1]` is below the token in `KEYS[2]`; registers
/// the token. Returns `{1, token}` when written, `{0, highest}` when rejected.
const WRITE_SOURCE: &str = r"
local highest = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < highest then
    return {0, highest}
end
if token > highest then
    redis.call('SET', KEYS[2], ARGV[1])
end
redis.call('SET', KEYS[1], ARGV[2])
return {1, token}
";

/// Reads `KEYS[1]` unless `ARGV[1]` is below the token in `KEYS[2]`; registers the token.
/// Returns `{1, value}` (value may be nil) or `{0, highest}` when rejected.
const READ_SOURCE: &str = r"
local highest = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < highest then
    return {0, highest}
end
if token > highest then
    redis.call('SET', KEYS[2], ARGV[1])
end
return {1, redis.call('GET', KEYS[1])}
";

// Sent whole with `EVAL`: one command per access, whatever the target's script cache holds.
pub(crate) static WRITE: LuaScript = LuaScript::new(WRITE_SOURCE);
pub(crate) static READ: LuaScript = LuaScript::new(READ_SOURCE);
