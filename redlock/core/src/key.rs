//! Resource names and the Redis keys that hold their leases.

use std::fmt;
use std::sync::Arc;

/// The prefix put in front of every resource name unless another is configured, so that lock
/// keys cannot collide with an application's data keys.
pub const DEFAULT_KEY_PREFIX: &str = "redlock:";

/// The longest resource name accepted, in bytes.
pub const MAX_RESOURCE_LEN: usize = 1024;

/// The longest key prefix accepted, in bytes.
pub const MAX_PREFIX_LEN: usize = 256;

/// The key under which one resource's lease is stored on every node: prefix + resource name.
///
/// Cheap to clone: the key's text is shared, counted by a reference count
/// ([`Self::new`]), or borrowed for the program's life and copied ([`Self::from_static`]).
///
/// ```
/// use redlock_core::LockKey;
/// let key = LockKey::new("redlock:", "stock-sync:warehouse-42").unwrap();
/// assert_eq!(key.as_str(), "redlock:stock-sync:warehouse-42");
/// assert_eq!(key.resource(), "stock-sync:warehouse-42");
/// assert!(LockKey::new("redlock:", "").is_err());
/// ```
#[derive(Clone)]
pub struct LockKey {
    key: Text,
    /// At most [`MAX_PREFIX_LEN`].
    prefix_len: u16,
    /// Whether the key holds a brace (its waiting marks' key then names no hash tag of its
    /// own: [`LockKey::wait_key`]), found once when it is made rather than at each release.
    braces: bool,
}

/// A key's text: shared by its clones, or borrowed for the program's life.
#[derive(Clone)]
enum Text {
    /// Made at run time; each clone counts itself on the shared counter.
    Shared(Arc<str>),
    /// A constant; a clone copies the reference. Cloned on a hot path by several threads at
    /// once (a model checker's states hold the key in every machine), a shared counter is
    /// one cache line that every thread writes on every clone and every drop.
    Static(&'static str),
}

impl PartialEq for LockKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str() && self.prefix_len == other.prefix_len
    }
}

impl Eq for LockKey {}

impl std::hash::Hash for LockKey {
    /// The text, then the prefix's length: whether the text is shared or borrowed does not
    /// count, as it does not for equality.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
        usize::from(self.prefix_len).hash(state);
    }
}

/// Checks a resource name and a prefix against the limits [`LockKey::new`] documents.
fn check(prefix: &str, resource: &str) -> Result<(), ResourceError> {
    if resource.is_empty() {
        return Err(ResourceError::Empty);
    }
    if resource.contains('\0') {
        return Err(ResourceError::ContainsNul);
    }
    if prefix.contains('\0') {
        return Err(ResourceError::PrefixContainsNul);
    }
    if resource.len() > MAX_RESOURCE_LEN {
        return Err(ResourceError::TooLong {
            len: resource.len(),
            max: MAX_RESOURCE_LEN,
        });
    }
    if prefix.len() > MAX_PREFIX_LEN {
        return Err(ResourceError::PrefixTooLong {
            len: prefix.len(),
            max: MAX_PREFIX_LEN,
        });
    }
    Ok(())
}

/// The length of a prefix that [`check`] accepted.
fn prefix_len(prefix: &str) -> u16 {
    const _: () = assert!(MAX_PREFIX_LEN <= u16::MAX as usize);
    u16::try_from(prefix.len()).unwrap_or(u16::MAX)
}

/// Whether `key` holds a `{` or a `}`.
fn has_braces(key: &str) -> bool {
    key.bytes().any(|b| b == b'{' || b == b'}')
}

impl LockKey {
    /// The key for `resource` under `prefix`.
    ///
    /// # Errors
    ///
    /// A [`ResourceError`] when the resource name is empty or longer than
    /// [`MAX_RESOURCE_LEN`] bytes, or the prefix is longer than [`MAX_PREFIX_LEN`] bytes.
    pub fn new(prefix: &str, resource: &str) -> Result<Self, ResourceError> {
        check(prefix, resource)?;
        let mut key = String::with_capacity(prefix.len() + resource.len());
        key.push_str(prefix);
        key.push_str(resource);
        Ok(Self {
            braces: has_braces(&key),
            key: Text::Shared(key.into()),
            prefix_len: prefix_len(prefix),
        })
    }

    /// The key `key`, which is `prefix` followed by the resource name, borrowed for the
    /// program's life: equal to [`Self::new`]`(prefix, resource)` in every respect, but a
    /// clone copies a reference where `new`'s keys count their clones on a counter they
    /// share. For a key cloned on a hot path by several threads at once (a model checker
    /// keeps the key in every machine of every state), where that counter is one cache
    /// line every thread writes.
    ///
    /// ```
    /// use redlock_core::LockKey;
    /// let key = LockKey::from_static("redlock:", "redlock:report").unwrap();
    /// assert_eq!(key, LockKey::new("redlock:", "report").unwrap());
    /// assert_eq!(key.resource(), "report");
    /// assert!(LockKey::from_static("lock:", "redlock:report").is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// What [`Self::new`] returns for the prefix and the resource name, and
    /// [`ResourceError::NotUnderPrefix`] when `key` does not begin with `prefix`.
    pub fn from_static(prefix: &str, key: &'static str) -> Result<Self, ResourceError> {
        let resource = key
            .strip_prefix(prefix)
            .ok_or(ResourceError::NotUnderPrefix)?;
        check(prefix, resource)?;
        Ok(Self {
            key: Text::Static(key),
            prefix_len: prefix_len(prefix),
            braces: has_braces(key),
        })
    }

    /// The full key as stored on the nodes.
    pub fn as_str(&self) -> &str {
        match &self.key {
            Text::Shared(key) => key,
            Text::Static(key) => key,
        }
    }

    /// The resource name, without the prefix.
    pub fn resource(&self) -> &str {
        &self.as_str()[usize::from(self.prefix_len)..]
    }

    /// The key of the resource's fence counter: the lock key followed by a NUL byte and
    /// `fence`. Resource names and prefixes may not contain NUL, so no lock key can ever
    /// equal a fence key, and two resources never share a counter.
    ///
    /// ```
    /// use redlock_core::LockKey;
    /// let key = LockKey::new("redlock:", "report").unwrap();
    /// assert_eq!(key.fence_key(), "redlock:report\0fence");
    /// ```
    pub fn fence_key(&self) -> String {
        format!("{}\0fence", self.as_str())
    }

    /// The key of the resource's waiting marks: a hash with one field per waiter that asked
    /// to be told of the key's release ([`Command::MarkWaiting`](super::Command::MarkWaiting));
    /// the release scripts delete it with the lock key and publish only if it was there.
    ///
    /// It begins with the lock key and a NUL byte (so that no lock key can equal it, as none
    /// can equal a fence key, and a key pattern that grants the lock key, such as
    /// `~redlock:*`, grants it too), then `wait`, and, when the lock key has no braces, the
    /// lock key again in braces: the release and mark scripts name both keys, and a Redis
    /// Cluster member refuses a script whose keys are in two hash slots (`CROSSSLOT`), even
    /// when it owns every slot. In braces, the lock key is the marks' key's hash tag, which
    /// hashes to the lock key's own slot. A lock key with a hash tag (`{report}:daily`) gives
    /// it to the marks' key as it is; one with braces and no hash tag cannot share its slot
    /// with another key this way.
    ///
    /// ```
    /// use redlock_core::LockKey;
    /// let key = LockKey::new("redlock:", "report").unwrap();
    /// assert_eq!(key.wait_key(), "redlock:report\0wait{redlock:report}");
    /// let tagged = LockKey::new("redlock:", "{report}:daily").unwrap();
    /// assert_eq!(tagged.wait_key(), "redlock:{report}:daily\0wait");
    /// ```
    pub fn wait_key(&self) -> String {
        // Pushed rather than `format!`ed: every release sends it, and the formatting
        // machinery cost about 800 instructions per call where this costs an allocation.
        let parts = self.wait_key_parts();
        let mut wait = String::with_capacity(parts.iter().map(|p| p.len()).sum());
        for part in parts {
            wait.push_str(part);
        }
        wait
    }

    /// [`Self::wait_key`] in four parts written one after the other (the last two empty
    /// for a lock key with braces), for a driver that writes them rather than make the key.
    ///
    /// ```
    /// use redlock_core::LockKey;
    /// let key = LockKey::new("redlock:", "report").unwrap();
    /// assert_eq!(key.wait_key_parts().concat(), key.wait_key());
    /// ```
    pub fn wait_key_parts(&self) -> [&str; 4] {
        let key = self.as_str();
        if self.braces {
            [key, "\0wait", "", ""]
        } else {
            [key, "\0wait{", key, "}"]
        }
    }
}

impl fmt::Debug for LockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for LockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The most resources one multi-resource lease may take.
pub const MAX_RESOURCES: usize = 64;

/// What one lease takes: one resource, or several taken all-or-nothing on each node.
///
/// Each resource keeps its own key (never a concatenation, so `["ab", "c"]` and
/// `["a", "bc"]` are different sets); the set is sorted and deduplicated, so the same
/// resources in any order are the same target.
///
/// ```
/// use redlock_core::Target;
/// let a = Target::many("redlock:", ["ab", "c"]).unwrap();
/// let b = Target::many("redlock:", ["a", "bc"]).unwrap();
/// assert_ne!(a, b);
/// assert_eq!(a, Target::many("redlock:", ["c", "ab", "c"]).unwrap());
/// assert_eq!(a.keys().len(), 2);
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// One resource.
    One(LockKey),
    /// Several resources, all-or-nothing per node (at least two).
    Many(Arc<[LockKey]>),
}

impl Target {
    /// The target for one resource under `prefix`: [`Target::One`].
    ///
    /// # Errors
    ///
    /// A [`ResourceError`] for an empty or over-long name.
    pub fn one(prefix: &str, resource: &str) -> Result<Self, ResourceError> {
        LockKey::new(prefix, resource).map(Self::One)
    }

    /// The target for `resources` under `prefix`: sorted and deduplicated; a single
    /// resource gives [`Target::One`].
    ///
    /// # Errors
    ///
    /// A [`ResourceError`] for an invalid name, no resources, or more than
    /// [`MAX_RESOURCES`].
    pub fn many<'a>(
        prefix: &str,
        resources: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, ResourceError> {
        let mut keys = resources
            .into_iter()
            .map(|resource| LockKey::new(prefix, resource))
            .collect::<Result<Vec<_>, _>>()?;
        keys.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        keys.dedup();
        match keys.len() {
            0 => Err(ResourceError::Empty),
            1 => Ok(Self::One(keys.remove(0))),
            n if n > MAX_RESOURCES => Err(ResourceError::TooMany {
                count: n,
                max: MAX_RESOURCES,
            }),
            _ => Ok(Self::Many(keys.into())),
        }
    }

    /// The keys, in canonical order.
    pub fn keys(&self) -> &[LockKey] {
        match self {
            Self::One(key) => std::slice::from_ref(key),
            Self::Many(keys) => keys,
        }
    }

    /// The resource names, comma separated (for messages).
    pub fn describe(&self) -> String {
        self.keys()
            .iter()
            .map(LockKey::resource)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl From<LockKey> for Target {
    fn from(key: LockKey) -> Self {
        Self::One(key)
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::One(key) => fmt::Debug::fmt(key, f),
            Self::Many(keys) => f.debug_list().entries(keys.iter()).finish(),
        }
    }
}

/// A resource name (or key prefix) that cannot name a lock.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Hash)]
#[non_exhaustive]
pub enum ResourceError {
    /// The resource name is empty.
    #[error("the resource name is empty")]
    Empty,
    /// The resource name is too long.
    #[error("the resource name is {len} bytes long, above the maximum of {max}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The resource name contains a NUL byte (reserved to separate fence counter keys).
    #[error("the resource name contains a NUL byte")]
    ContainsNul,
    /// The key prefix contains a NUL byte.
    #[error("the key prefix contains a NUL byte")]
    PrefixContainsNul,
    /// Too many resources for one lease.
    #[error("{count} resources in one lease, above the maximum of {max}")]
    TooMany {
        /// How many were given.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// A constant key ([`LockKey::from_static`]) does not begin with its prefix.
    #[error("the key does not begin with its prefix")]
    NotUnderPrefix,
    /// The key prefix is too long.
    #[error("the key prefix is {len} bytes long, above the maximum of {max}")]
    PrefixTooLong {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CRC16 (XMODEM), as Redis Cluster hashes keys.
    fn crc16(data: &[u8]) -> u16 {
        data.iter().fold(0u16, |crc, &byte| {
            (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
                if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                }
            })
        })
    }

    /// A key's hash tag, as Redis reads it (`keyHashSlot` in Redis' `cluster.c`): the text
    /// between its first `{` and the first `}` after it, when not empty.
    fn hash_tag(key: &str) -> Option<&[u8]> {
        let bytes = key.as_bytes();
        let open = bytes.iter().position(|&b| b == b'{')?;
        let len = bytes[open + 1..].iter().position(|&b| b == b'}')?;
        (len > 0).then(|| &bytes[open + 1..open + 1 + len])
    }

    /// Redis Cluster's hash slot of a key: CRC16 of its hash tag, or of the whole key
    /// without one, modulo 16,384.
    fn hash_slot(key: &str) -> u16 {
        crc16(hash_tag(key).unwrap_or(key.as_bytes())) & 16_383
    }

    #[test]
    fn the_slot_function_is_redis_ones() {
        // Redis' cluster specification: CRC16 of "123456789" is 0x31C3, and its examples of
        // hash tags.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(hash_slot("{user1000}.following"), hash_slot("user1000"));
        assert_eq!(hash_slot("foo{}{bar}"), crc16(b"foo{}{bar}") & 16_383);
        assert_eq!(hash_slot("foo{{bar}}zap"), hash_slot("{bar"));
        assert_eq!(hash_slot("foo{bar}{zap}"), hash_slot("bar"));
    }

    proptest::proptest! {
        /// A lock key and its waiting marks' key share a hash slot, so that the release and
        /// mark scripts run on a Redis Cluster member, unless the lock key has braces and no
        /// hash tag; the marks' key begins with the lock key and a NUL byte.
        #[test]
        fn the_waiting_marks_share_the_lock_keys_slot(resource in "[a-z{}:]{1,12}") {
            let key = LockKey::new("redlock:", &resource).unwrap();
            let shared = hash_slot(&key.wait_key()) == hash_slot(key.as_str());
            let braces = key.as_str().contains(['{', '}']);
            let untaggable = hash_tag(key.as_str()).is_none() && braces;
            proptest::prop_assert!(shared || untaggable, "{:?}", key.wait_key());
            let starts = format!("{}\0", key.as_str());
            proptest::prop_assert!(key.wait_key().starts_with(&starts));
            proptest::prop_assert_eq!(key.wait_key_parts().concat(), key.wait_key());
        }
    }

    #[test]
    fn one_resource_is_the_single_target_many_makes_of_it() {
        assert_eq!(
            Target::one("redlock:", "a"),
            Target::many("redlock:", ["a"])
        );
        assert!(matches!(Target::one("redlock:", "a"), Ok(Target::One(_))));
        assert_eq!(Target::one("redlock:", ""), Target::many("redlock:", [""]));
        assert!(Target::one("redlock:", "").is_err());
    }

    #[test]
    fn a_constant_key_is_the_key_new_makes() {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let hash = |key: &LockKey| {
            let mut h = DefaultHasher::new();
            key.hash(&mut h);
            h.finish()
        };
        let made = LockKey::new("redlock:", "model").unwrap();
        let constant = LockKey::from_static("redlock:", "redlock:model").unwrap();
        assert_eq!(constant, made);
        assert_eq!(hash(&constant), hash(&made));
        assert_eq!(
            format!("{constant:?} {constant}"),
            format!("{made:?} {made}")
        );
        assert_eq!(constant.resource(), "model");
        assert_eq!(constant.wait_key(), made.wait_key());
        assert_ne!(
            LockKey::from_static("redlock:m", "redlock:model").unwrap(),
            made,
            "the same text under another prefix"
        );
        assert_eq!(
            LockKey::from_static("redlock:", "redlock:"),
            Err(ResourceError::Empty)
        );
        assert_eq!(
            LockKey::from_static("lock:", "redlock:model"),
            Err(ResourceError::NotUnderPrefix)
        );
    }

    #[test]
    fn limits() {
        let long = "x".repeat(MAX_RESOURCE_LEN + 1);
        assert_eq!(
            LockKey::new("", &long),
            Err(ResourceError::TooLong {
                len: MAX_RESOURCE_LEN + 1,
                max: MAX_RESOURCE_LEN
            })
        );
        assert!(LockKey::new("", &long[1..]).is_ok());
        assert!(matches!(
            LockKey::new(&"p".repeat(MAX_PREFIX_LEN + 1), "r"),
            Err(ResourceError::PrefixTooLong { .. })
        ));
        // Any UTF-8 but NUL, including separators and control characters, is a valid name.
        let key = LockKey::new("redlock:", "a:b\n\u{1}ü").unwrap();
        assert_eq!(key.resource(), "a:b\n\u{1}ü");
        assert_eq!(
            LockKey::new("redlock:", "a\0b"),
            Err(ResourceError::ContainsNul)
        );
        assert_eq!(
            LockKey::new("p\0", "a"),
            Err(ResourceError::PrefixContainsNul)
        );
    }
}
