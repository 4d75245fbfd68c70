//! Owner tokens: the value each node stores under the lock key.

use std::fmt;

use rand::Rng;

/// The length of a token in bytes: 128 bits.
pub const TOKEN_LEN: usize = 16;

/// How many leading bytes of a token name the client that drew it (the client's tokens and
/// its waiters' ids share them; the remaining 96 bits are drawn afresh each time). The
/// release script compares them (8 hex characters) to tell a waiting mark of another
/// process from one of the releasing client's own waiters
/// ([`Reply::ReleasedOthersWaiting`](crate::Reply::ReleasedOthersWaiting)).
pub const CLIENT_PREFIX_LEN: usize = 4;

/// The random value that marks one acquisition round as the owner of a key.
///
/// Every round writes a fresh token, so a late or duplicated command from an old round can
/// never release or extend a newer one. Tokens are stored on the nodes as 32 lowercase hex
/// characters.
///
/// ```
/// use redlock_core::Token;
/// let token = Token::from_bytes([0xab; 16]);
/// assert_eq!(token.to_string(), "abababababababababababababababab");
/// assert_eq!(token.short(), "abababab");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token([u8; TOKEN_LEN]);

impl Token {
    /// A token with the given bytes.
    pub const fn from_bytes(bytes: [u8; TOKEN_LEN]) -> Self {
        Self(bytes)
    }

    /// A token drawn from `rng`. The client draws from the operating system's CSPRNG; the
    /// simulator from its seeded generator.
    pub fn random<R: Rng + ?Sized>(rng: &mut R) -> Self {
        let mut bytes = [0; TOKEN_LEN];
        rng.fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// A token drawn from `rng` under the client prefix `client` (see
    /// [`CLIENT_PREFIX_LEN`]).
    pub fn random_of<R: Rng + ?Sized>(client: [u8; CLIENT_PREFIX_LEN], rng: &mut R) -> Self {
        let mut bytes = [0; TOKEN_LEN];
        bytes[..CLIENT_PREFIX_LEN].copy_from_slice(&client);
        rng.fill_bytes(&mut bytes[CLIENT_PREFIX_LEN..]);
        Self(bytes)
    }

    /// Whether `self` and `other` were drawn by the same client (their first
    /// [`CLIENT_PREFIX_LEN`] bytes agree).
    pub fn same_client(&self, other: &Self) -> bool {
        self.0[..CLIENT_PREFIX_LEN] == other.0[..CLIENT_PREFIX_LEN]
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; TOKEN_LEN] {
        &self.0
    }

    /// The value stored on the nodes: the bytes as lowercase hex.
    pub fn to_hex(&self) -> [u8; 2 * TOKEN_LEN] {
        // Written into every command a client sends: one table look-up per byte.
        const PAIRS: [[u8; 2]; 256] = {
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            let mut pairs = [[0; 2]; 256];
            let mut byte = 0;
            while byte < 256 {
                pairs[byte] = [DIGITS[byte >> 4], DIGITS[byte & 0x0f]];
                byte += 1;
            }
            pairs
        };
        let mut out = [0; 2 * TOKEN_LEN];
        for (pair, byte) in out.chunks_exact_mut(2).zip(self.0) {
            pair.copy_from_slice(&PAIRS[usize::from(byte)]);
        }
        out
    }

    /// Parses the value stored on a node; `None` unless it is 32 hex characters.
    pub fn from_hex(hex: &[u8]) -> Option<Self> {
        fn nibble(c: u8) -> Option<u8> {
            match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                b'A'..=b'F' => Some(c - b'A' + 10),
                _ => None,
            }
        }
        if hex.len() != 2 * TOKEN_LEN {
            return None;
        }
        let mut bytes = [0; TOKEN_LEN];
        for (i, pair) in hex.chunks_exact(2).enumerate() {
            bytes[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
        }
        Some(Self(bytes))
    }

    /// The first 8 hex characters, enough to tell holders apart in logs.
    pub fn short(&self) -> String {
        self.to_string()[..8].to_owned()
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.to_hex();
        // Hex digits are ASCII.
        f.write_str(std::str::from_utf8(&hex).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;

    proptest! {
        #[test]
        fn hex_round_trips(bytes in any::<[u8; TOKEN_LEN]>()) {
            let token = Token::from_bytes(bytes);
            prop_assert_eq!(Token::from_hex(&token.to_hex()), Some(token));
        }

        #[test]
        fn hex_is_lowercase_two_digits_per_byte(bytes in any::<[u8; TOKEN_LEN]>()) {
            let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let hex = Token::from_bytes(bytes).to_hex();
            prop_assert_eq!(hex.as_slice(), expected.as_bytes());
        }
    }

    #[test]
    fn a_clients_tokens_share_its_prefix_and_nothing_else() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let a = Token::random_of([1, 2, 3, 4], &mut rng);
        let b = Token::random_of([1, 2, 3, 4], &mut rng);
        let other = Token::random_of([1, 2, 3, 5], &mut rng);
        assert!(a.same_client(&b) && a != b);
        assert!(!a.same_client(&other));
        assert_eq!(&a.to_hex()[..8], b"01020304");
    }

    #[test]
    fn rejects_malformed_hex() {
        assert_eq!(Token::from_hex(b"abc"), None);
        assert_eq!(Token::from_hex(&[b'g'; 32]), None);
    }
}
