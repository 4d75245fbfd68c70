//! Every Lua script of the crate, and how it is sent.
//!
//! - [`lock`]: the scripts the client runs on the lock nodes (ownership-checked release and
//!   extension, the two phases of a fenced acquisition, multi-resource leases).
//! - [`resource`]: the scripts [`crate::fencing::FencedKey`] runs on the protected Redis
//!   target (the token check before every write or read).
//!
//! A script sent whole with `EVAL` is hashed by the node on every call (SHA1 of its
//! source) and costs its bytes on the wire; `EVALSHA` sends only the hash, but needs the
//! script in the node's cache, which a restart, a failover or `SCRIPT FLUSH` empties. The
//! lock scripts are therefore loaded (`SCRIPT LOAD`) on every new connection to a lock
//! node, in the same round trip as the `INFO` that identifies it, and a connection sends
//! `EVALSHA` only once those loads answered with the expected hashes: a restarted node is
//! reached through a new connection, which sends `EVAL` until it has loaded them. Should
//! the cache still be emptied under an open connection (`SCRIPT FLUSH`), the `NOSCRIPT`
//! answer is followed by the same call with `EVAL` at once, and a release's call is never
//! cut in between (see the client's wire). The fenced target's scripts are sent whole.

pub(crate) mod lock;
pub(crate) mod resource;

use std::sync::OnceLock;

use redis::Cmd;

/// A Lua script: its source, and the SHA1 that names it in a node's script cache.
pub(crate) struct LuaScript {
    source: &'static str,
    hash: OnceLock<String>,
}

impl LuaScript {
    pub(crate) const fn new(source: &'static str) -> Self {
        Self {
            source,
            hash: OnceLock::new(),
        }
    }

    /// The script's SHA1 in hex, as `SCRIPT LOAD` answers and `EVALSHA` takes it.
    pub(crate) fn hash(&self) -> &str {
        self.hash
            .get_or_init(|| sha1_smol::Sha1::from(self.source).digest().to_string())
    }

    /// The script's source.
    pub(crate) fn source(&self) -> &'static str {
        self.source
    }

    /// `EVAL source numkeys keys…`; the caller appends the script's arguments.
    pub(crate) fn eval(&self, keys: &[&str]) -> Cmd {
        let mut cmd = sized(keys, self.source.len());
        cmd.arg("EVAL").arg(self.source).arg(keys.len()).arg(keys);
        cmd
    }

    /// `EVALSHA hash numkeys keys…`; the caller appends the script's arguments.
    pub(crate) fn evalsha(&self, keys: &[&str]) -> Cmd {
        let hash = self.hash();
        let mut cmd = sized(keys, hash.len());
        cmd.arg("EVALSHA").arg(hash).arg(keys.len()).arg(keys);
        cmd
    }

    /// `SCRIPT LOAD source`: puts the script in the node's cache; answers its hash.
    pub(crate) fn load(&self) -> Cmd {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(self.source);
        cmd
    }
}

/// An empty command with room for a script call on `keys` (`body` bytes of source or
/// hash) and a few arguments: its buffer is allocated once, not grown argument by argument.
fn sized(keys: &[&str], body: usize) -> Cmd {
    /// The command's name, the key count and a token, a TTL or a fence.
    const ROOM: usize = 96;
    let keys_len: usize = keys.iter().map(|key| key.len()).sum();
    Cmd::with_capacity(keys.len() + 5, body + keys_len + ROOM)
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

    fn args(cmd: &redis::Cmd) -> Vec<Vec<u8>> {
        cmd.args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => b"<cursor>".to_vec(),
            })
            .collect()
    }

    #[test]
    fn evalsha_names_the_script_by_the_sha1_of_its_source() {
        // The SHA1 Redis gives `return 1` (`SCRIPT LOAD "return 1"`).
        let script = LuaScript::new("return 1");
        assert_eq!(script.hash(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
        let mut cmd = script.evalsha(&["k"]);
        cmd.arg("x");
        let expected: Vec<&[u8]> = vec![
            b"EVALSHA",
            b"e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            b"1",
            b"k",
            b"x",
        ];
        assert_eq!(args(&cmd), expected);
        let load: Vec<&[u8]> = vec![b"SCRIPT", b"LOAD", b"return 1"];
        assert_eq!(args(&script.load()), load);
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
