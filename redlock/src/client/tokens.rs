//! Owner tokens: 128 random bits per acquisition round.
//!
//! A token only has to be unique among the owners of a key, and unguessable enough that no
//! other client produces it by chance; a CSPRNG seeded once from the operating system does
//! that without a system call per round. The generator is ChaCha12 (`rand`'s `StdRng`), one
//! per client.

use std::sync::Mutex;

use rand::rngs::{StdRng, SysRng};
use rand::{Rng, SeedableRng};

use crate::error::Error;
use redlock_core::{TOKEN_LEN, Token};

/// The client's token generator.
pub(crate) struct Tokens(Mutex<StdRng>);

impl Tokens {
    /// A generator seeded from the operating system's CSPRNG.
    ///
    /// # Errors
    ///
    /// [`Error::Entropy`] when the operating system has no randomness to give.
    pub(crate) fn new() -> Result<Self, Error> {
        let rng = StdRng::try_from_rng(&mut SysRng).map_err(|e| Error::Entropy(e.to_string()))?;
        Ok(Self(Mutex::new(rng)))
    }

    /// A fresh token.
    pub(crate) fn next(&self) -> Token {
        let mut bytes = [0; TOKEN_LEN];
        // The generator's state is valid whatever a panicking holder did with it.
        super::lock(&self.0).fill_bytes(&mut bytes);
        Token::from_bytes(bytes)
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
        // Two clients draw from independent seeds.
        let other = Tokens::new().unwrap();
        assert!(!seen.contains(&other.next()));
    }
}
