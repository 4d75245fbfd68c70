//! Owner tokens: the client's prefix and 96 random bits per acquisition round.
//!
//! A token only has to be unique among the owners of a key, and unguessable enough that no
//! other client produces it by chance; a CSPRNG seeded once from the operating system does
//! that without a system call per round. The generator is ChaCha12 (`rand`'s `StdRng`), one
//! per client. The first [`CLIENT_PREFIX_LEN`] bytes are drawn once per client and shared by
//! all its tokens and its waiters' ids: they tell the release script a waiting mark of
//! another process from one of this client's own waiters (see `lua/lock.rs`).

use std::sync::Mutex;

use rand::rngs::{StdRng, SysRng};
use rand::{Rng, SeedableRng};

use crate::error::Error;
use redlock_core::{CLIENT_PREFIX_LEN, Token};

/// The client's token generator.
pub(crate) struct Tokens {
    rng: Mutex<StdRng>,
    /// The bytes every token of this client begins with.
    client: [u8; CLIENT_PREFIX_LEN],
}

impl Tokens {
    /// A generator seeded from the operating system's CSPRNG.
    ///
    /// # Errors
    ///
    /// [`Error::Entropy`] when the operating system has no randomness to give.
    pub(crate) fn new() -> Result<Self, Error> {
        let mut rng =
            StdRng::try_from_rng(&mut SysRng).map_err(|e| Error::Entropy(e.to_string()))?;
        let mut client = [0; CLIENT_PREFIX_LEN];
        rng.fill_bytes(&mut client);
        Ok(Self {
            rng: Mutex::new(rng),
            client,
        })
    }

    /// A fresh token, under this client's prefix.
    pub(crate) fn next(&self) -> Token {
        // The generator's state is valid whatever a panicking holder did with it.
        Token::random_of(self.client, &mut *super::lock(&self.rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tokens_do_not_repeat() {
        let tokens = Tokens::new().unwrap();
        let seen: HashSet<Token> = (0..10_000).map(|_| tokens.next()).collect();
        assert_eq!(seen.len(), 10_000);
        // Two clients draw from independent seeds, under their own prefixes.
        let other = Tokens::new().unwrap();
        assert!(!seen.contains(&other.next()));
        let mine = tokens.next();
        assert!(seen.iter().all(|token| token.same_client(&mine)));
        assert!(!other.next().same_client(&mine));
    }
}
