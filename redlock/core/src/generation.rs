//! Which form of the lock request a server takes, by its version.

use super::info_field;

/// What a server understands of the lock request. Redis 7.0 is the first to take `GET` with
/// `NX` in one `SET`, which lets a refused `SET` name the holder in the same command; older
/// servers answer it with a syntax error. [`Command::for_server`](super::Command::for_server)
/// turns each acquisition command into the form the node's generation takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerGeneration {
    /// Redis 7.0 and later, and Valkey (which reports a Redis version of 7.2): `SET … NX GET
    /// PX`. Also what a server is taken to be when it does not say.
    #[default]
    Redis7,
    /// Redis before 7.0 (6.2 and older): `SET … NX PX`, which does not say who holds the key.
    /// A waiter's round reads the holder with `GET` in the same request.
    BeforeRedis7,
}

impl ServerGeneration {
    /// The generation an `INFO` answer names in its `redis_version` line; [`Self::Redis7`]
    /// when it names none (an `INFO` without the server section) or one that cannot be read.
    ///
    /// ```
    /// use redlock_core::ServerGeneration;
    ///
    /// let info = "# Server\r\nredis_version:6.2.14\r\nrun_id:abc\r\n";
    /// assert_eq!(ServerGeneration::from_info(info), ServerGeneration::BeforeRedis7);
    /// // Valkey 8 says it is Redis 7.2.
    /// let info = "# Server\r\nredis_version:7.2.4\r\nvalkey_version:8.1.8\r\n";
    /// assert_eq!(ServerGeneration::from_info(info), ServerGeneration::Redis7);
    /// ```
    pub fn from_info(info: &str) -> Self {
        info_field(info, "redis_version").map_or(Self::Redis7, Self::from_version)
    }

    /// The generation of a server of this version (`major.minor.patch`); [`Self::Redis7`]
    /// when the major version cannot be read.
    pub fn from_version(version: &str) -> Self {
        let major = version
            .split('.')
            .next()
            .and_then(|m| m.trim().parse::<u32>().ok());
        match major {
            Some(major) if major < 7 => Self::BeforeRedis7,
            _ => Self::Redis7,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ServerGeneration::{self, BeforeRedis7, Redis7};

    #[test]
    fn versions_before_seven_are_the_older_generation() {
        for (version, generation) in [
            ("6.2.14", BeforeRedis7),
            ("6.0.0", BeforeRedis7),
            ("5.0.7", BeforeRedis7),
            ("7.0.15", Redis7),
            ("7.2.4", Redis7),
            ("8.0.2", Redis7),
            ("10.1.0", Redis7),
            ("", Redis7),
            ("x.y", Redis7),
        ] {
            assert_eq!(
                ServerGeneration::from_version(version),
                generation,
                "{version}"
            );
        }
        assert_eq!(ServerGeneration::from_info("run_id:a\r\n"), Redis7);
        assert_eq!(
            ServerGeneration::from_info("# Server\r\nredis_version:6.2.6\r\n"),
            BeforeRedis7
        );
    }
}
