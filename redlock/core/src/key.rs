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
    prefix_len: usize,
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
        self.prefix_len.hash(state);
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
            key: Text::Shared(key.into()),
            prefix_len: prefix.len(),
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
            prefix_len: prefix.len(),
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
        &self.as_str()[self.prefix_len..]
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

    /// The key of the resource's waiting marks: the lock key followed by a NUL byte and
    /// `wait`. A hash with one field per waiter that asked to be told of the key's release
    /// ([`Command::MarkWaiting`](super::Command::MarkWaiting)); the release scripts delete it
    /// with the lock key and publish only if it was there. Like the fence key, no lock key
    /// can ever equal it.
    ///
    /// ```
    /// use redlock_core::LockKey;
    /// let key = LockKey::new("redlock:", "report").unwrap();
    /// assert_eq!(key.wait_key(), "redlock:report\0wait");
    /// ```
    pub fn wait_key(&self) -> String {
        // Pushed rather than `format!`ed: every release sends it, and the formatting
        // machinery cost about 800 instructions per call where this costs an allocation.
        let key = self.as_str();
        let mut wait = String::with_capacity(key.len() + Self::WAIT_SUFFIX.len());
        wait.push_str(key);
        wait.push_str(Self::WAIT_SUFFIX);
        wait
    }

    /// What follows the lock key in its waiting marks' key ([`LockKey::wait_key`]), for a
    /// driver that writes the two one after the other rather than make the key.
    pub const WAIT_SUFFIX: &'static str = "\0wait";
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
