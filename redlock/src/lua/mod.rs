//! Every Lua script of the crate, and how it is sent: whole, with `EVAL`.
//!
//! - [`lock`]: the scripts the client runs on the lock nodes (ownership-checked release and
//!   extension, the two phases of a fenced acquisition, multi-resource leases).
//! - [`resource`]: the scripts [`crate::fencing::FencedKey`] runs on the protected Redis
//!   target (the token check before every write or read).
//!
//! `EVALSHA` saves a few hundred bytes per call but needs the script in the node's cache,
//! which a restart, a failover or `SCRIPT FLUSH` empties. Its fallback (`NOSCRIPT`, then
//! `SCRIPT LOAD`, then `EVALSHA` again) takes three round trips, and every request here is
//! bounded by one per-node timeout and then dropped: a fallback cut short after the first
//! reply leaves a release unsent, and the key it should have deleted stays until its TTL.
//! With `EVAL` every operation is one command, sent whole or not at all, in order with the
//! lease's other commands on the connection. The node caches the compiled script under its
//! SHA1 either way, so the only cost is the script's bytes on the wire.

pub(crate) mod lock;
pub(crate) mod resource;

use redis::{Cmd, ToRedisArgs};

/// A Lua script, sent whole on every call.
pub(crate) struct LuaScript {
    source: &'static str,
}

impl LuaScript {
    pub(crate) const fn new(source: &'static str) -> Self {
        Self { source }
    }

    /// `EVAL source numkeys keys…`; the caller appends the script's arguments.
    pub(crate) fn eval<K: ToRedisArgs>(&self, keys: &[K]) -> Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(self.source).arg(keys.len()).arg(keys);
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::LuaScript;

    #[test]
    fn eval_carries_the_source_the_key_count_and_the_keys() {
        let script = LuaScript::new("return KEYS[2]");
        let mut cmd = script.eval(&["a", "b"]);
        cmd.arg("x");
        let args: Vec<Vec<u8>> = cmd
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => b"<cursor>".to_vec(),
            })
            .collect();
        let expected: Vec<&[u8]> = vec![b"EVAL", b"return KEYS[2]", b"2", b"a", b"b", b"x"];
        assert_eq!(args, expected);
    }

    /// Every script of the crate is in this module: no Lua, and no script handle, anywhere
    /// else under `src/`.
    #[test]
    fn every_script_lives_in_this_module() {
        fn sources(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).expect("a source directory") {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    sources(&path, found);
                } else if path.extension().is_some_and(|x| x == "rs") {
                    found.push(path);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        let outside: Vec<String> = files
            .iter()
            .filter(|f| !f.starts_with(src.join("lua")))
            .filter(|f| {
                let text = std::fs::read_to_string(f).expect("a readable source file");
                text.contains("redis.call(") || text.contains("LuaScript::new(")
            })
            .map(|f| f.display().to_string())
            .collect();
        assert!(files.len() > 10, "no sources found under {}", src.display());
        assert!(outside.is_empty(), "Lua outside src/lua/: {outside:?}");
    }
}
