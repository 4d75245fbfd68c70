//! A key's name as commands carry it and a node's store keeps it.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// A key's name: shared by its clones through a reference count, or a constant copied by
/// reference. The model checker's names are constants: its states hold them in every
/// message and every node's store, and a shared count is one cache line that every thread
/// writes on each clone and each drop of a state. Equality, order, hash and `Debug` are the
/// text's, whichever the kind.
#[derive(Clone)]
pub(crate) enum Name {
    Shared(Arc<str>),
    Static(&'static str),
}

impl Name {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Shared(name) => name,
            Self::Static(name) => name,
        }
    }
}

impl Deref for Name {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Name {
    /// As the text hashes (and so as an `Arc<str>` of it did).
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Name {
    fn from(name: &str) -> Self {
        Self::Shared(Arc::from(name))
    }
}

impl From<String> for Name {
    fn from(name: String) -> Self {
        Self::Shared(Arc::from(name))
    }
}

#[cfg(test)]
mod tests {
    use super::Name;
    use std::hash::{DefaultHasher, Hash, Hasher};
    use std::sync::Arc;

    fn hash<T: Hash + ?Sized>(value: &T) -> u64 {
        let mut h = DefaultHasher::new();
        value.hash(&mut h);
        h.finish()
    }

    #[test]
    fn a_constant_name_is_the_shared_one_in_every_respect() {
        let shared = Name::from("redlock:model");
        let constant = Name::Static("redlock:model");
        assert_eq!(shared, constant);
        assert_eq!(hash(&shared), hash(&constant));
        assert_eq!(hash(&constant), hash(&Arc::<str>::from("redlock:model")));
        assert_eq!(format!("{constant:?}"), format!("{:?}", "redlock:model"));
        assert!(Name::Static("a") < Name::from("b"));
    }
}
