//! The tokens of this client's leases that are still in memory, so that a round lost to one
//! of them can say so: leases are not re-entrant, and "held by another owner" would send the
//! reader looking for another process.
//!
//! Only an error's wording depends on it; nothing decides a round by it.

use std::collections::HashSet;
use std::sync::Mutex;

use super::lock;
use redlock_core::{NodeStatus, Reply, Token};

/// The live leases' tokens of one client (every handle of it).
#[derive(Default)]
pub(crate) struct OwnLeases(Mutex<HashSet<Token, foldhash::fast::RandomState>>);

impl OwnLeases {
    /// A lease with `token` was granted.
    pub(crate) fn insert(&self, token: Token) {
        lock(&self.0).insert(token);
    }

    /// The lease with `token` is gone (released or dropped).
    pub(crate) fn remove(&self, token: &Token) {
        lock(&self.0).remove(token);
    }

    /// Whether a node of the round read the token of one of these leases as the holder.
    pub(crate) fn held_any<'a>(&self, statuses: impl IntoIterator<Item = &'a NodeStatus>) -> bool {
        let own = lock(&self.0);
        !own.is_empty()
            && statuses.into_iter().any(|status| {
                matches!(status.reply(), Some(Reply::TakenBy { holder, .. }) if own.contains(&holder))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken_by(holder: Token) -> NodeStatus {
        NodeStatus::Replied(Reply::TakenBy {
            holder,
            remaining: None,
        })
    }

    #[test]
    fn a_holder_is_recognised_while_its_lease_lives() {
        let (mine, theirs) = (Token::from_bytes([1; 16]), Token::from_bytes([2; 16]));
        let own = OwnLeases::default();
        own.insert(mine);
        assert!(own.held_any(&[taken_by(theirs), taken_by(mine)]));
        assert!(!own.held_any(&[taken_by(theirs), NodeStatus::Replied(Reply::Taken)]));
        own.remove(&mine);
        assert!(!own.held_any(&[taken_by(mine)]));
    }
}
