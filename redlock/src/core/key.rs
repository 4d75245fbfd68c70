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
/// Cheap to clone (the key is shared).
///
/// ```
/// use redlock::core::LockKey;
/// let key = LockKey::new("redlock:", "stock-sync:warehouse-42").unwrap();
/// assert_eq!(key.as_str(), "redlock:stock-sync:warehouse-42");
/// assert_eq!(key.resource(), "stock-sync:warehouse-42");
/// assert!(LockKey::new("redlock:", "").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LockKey {
    key: Arc<str>,
    prefix_len: usize,
}

impl LockKey {
    /// The key for `resource` under `prefix`.
    ///
    /// # Errors
    ///
    /// A [`ResourceError`] when the resource name is empty or longer than
    /// [`MAX_RESOURCE_LEN`] bytes, or the prefix is longer than [`MAX_PREFIX_LEN`] bytes.
    pub fn new(prefix: &str, resource: &str) -> Result<Self, ResourceError> {
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
        let mut key = String::with_capacity(prefix.len() + resource.len());
        key.push_str(prefix);
        key.push_str(resource);
        Ok(Self {
            key: key.into(),
            prefix_len: prefix.len(),
        })
    }

    /// The full key as stored on the nodes.
    pub fn as_str(&self) -> &str {
        &self.key
    }

    /// The resource name, without the prefix.
    pub fn resource(&self) -> &str {
        &self.key[self.prefix_len..]
    }

    /// The key of the resource's fence counter: the lock key followed by a NUL byte and
    /// `fence`. Resource names and prefixes may not contain NUL, so no lock key can ever
    /// equal a fence key, and two resources never share a counter.
    ///
    /// ```
    /// use redlock::core::LockKey;
    /// let key = LockKey::new("redlock:", "report").unwrap();
    /// assert_eq!(key.fence_key(), "redlock:report\0fence");
    /// ```
    pub fn fence_key(&self) -> String {
        format!("{}\0fence", self.key)
    }
}

impl fmt::Debug for LockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.key)
    }
}

impl fmt::Display for LockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

/// A resource name (or key prefix) that cannot name a lock.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
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
