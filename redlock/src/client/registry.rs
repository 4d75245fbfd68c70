//! A map whose entries live only as long as something else holds them: the client's state
//! per resource (its lanes, its waiters), created on first use and gone with the last user.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Weak entries by key. A key nobody holds any more costs one dead entry until the next
/// sweep, which runs when the map has doubled since the last one: O(1) per insertion over
/// time.
pub(crate) struct WeakMap<K, V> {
    inner: Mutex<Inner<K, V>>,
}

struct Inner<K, V> {
    /// Looked up on every acquisition and release: hashed with foldhash rather than SipHash
    /// (SipHash took about 2 % of the client's instructions per operation). Its
    /// seed is random per map, so keys chosen to collide cannot be prepared in advance.
    entries: HashMap<K, Weak<V>, foldhash::fast::RandomState>,
    sweep_at: usize,
}

/// The size below which dead entries are never swept.
const MIN_SWEEP: usize = 64;

impl<K: Hash + Eq, V> Default for WeakMap<K, V> {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                entries: HashMap::default(),
                sweep_at: MIN_SWEEP,
            }),
        }
    }
}

impl<K: Hash + Eq, V> WeakMap<K, V> {
    fn lock(&self) -> MutexGuard<'_, Inner<K, V>> {
        super::lock(&self.inner)
    }

    /// The live entry for `key`, or a new one made by `make` (and kept while it lives).
    pub(crate) fn get_or_insert_with<Q>(&self, key: &Q, make: impl FnOnce() -> V) -> Arc<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut inner = self.lock();
        if let Some(live) = inner.entries.get(key).and_then(Weak::upgrade) {
            return live;
        }
        let value = Arc::new(make());
        inner.entries.insert(key.to_owned(), Arc::downgrade(&value));
        if inner.entries.len() >= inner.sweep_at {
            inner.entries.retain(|_, entry| entry.strong_count() > 0);
            inner.sweep_at = (inner.entries.len() * 2).max(MIN_SWEEP);
        }
        value
    }

    /// The live entry for `key`, if any.
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.lock().entries.get(key).and_then(Weak::upgrade)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_lives_while_it_is_held() {
        let map: WeakMap<String, u32> = WeakMap::default();
        let first = map.get_or_insert_with("a", || 1);
        let second = map.get_or_insert_with("a", || 2);
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(*map.get("a").unwrap(), 1);
        drop((first, second));
        assert!(map.get("a").is_none());
        assert_eq!(*map.get_or_insert_with("a", || 3), 3);
    }

    #[test]
    fn dead_entries_are_swept() {
        let map: WeakMap<String, usize> = WeakMap::default();
        for i in 0..1000 {
            drop(map.get_or_insert_with(&format!("r{i}"), || i));
        }
        assert!(map.len() <= MIN_SWEEP);
    }
}
