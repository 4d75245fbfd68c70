//! The model's lock tokens: each names the client that drew it and how many that client had
//! drawn, so that a client's tokens are its own whatever the others did.
//!
//! A token was numbered by the world (the n-th drawn by any client): the first tokens went
//! to the clients in index order, so no state was the image of another under a renaming of
//! the clients, and client symmetry merged almost nothing. Numbered per client, a renaming
//! of the clients renames the owner written in each token and nothing else
//! (`client_symmetry.rs`). Tokens are only ever compared for equality (a node's key holds
//! one, a release or an extension names one, a waiter hears one): the one place that orders
//! them, a node's waiting marks (kept sorted, as a Redis hash's fields are a set), is a set
//! whose order no step reads.
//!
//! The first [`CLIENT_PREFIX_LEN`] bytes are the client's prefix, as a client of the library
//! begins every token and waiter id it draws with its own (the release script tells another
//! client's waiting mark by them): the owner, then zeros. The last bytes are a fixed tag, so
//! that a hasher can tell a model token from any other 16 bytes it is fed
//! (`client_symmetry::Renamed`).

use redlock_core::{CLIENT_PREFIX_LEN, Token};

/// Where the count drawn goes: after the client's prefix.
const DRAWN: usize = CLIENT_PREFIX_LEN;

/// The tag in the last bytes of every model token.
const TAG: [u8; 16 - DRAWN - 2] = *b"\xa5redlock-\x5a";

/// The token client `client` draws as its `drawn`-th (from 1).
pub(super) fn model_token(client: u8, drawn: u16) -> Token {
    let mut bytes = [0; 16];
    bytes[0] = client;
    bytes[DRAWN..DRAWN + 2].copy_from_slice(&drawn.to_be_bytes());
    bytes[DRAWN + 2..].copy_from_slice(&TAG);
    Token::from_bytes(bytes)
}

/// The client that drew the token whose 16 bytes are `bytes`, if they are a model token's.
#[inline]
pub(super) fn owner(bytes: &[u8]) -> Option<u8> {
    (bytes.len() == 16 && bytes[1..DRAWN] == [0; DRAWN - 1] && bytes[DRAWN + 2..] == TAG)
        .then(|| bytes[0])
}

/// `token` with its owner renamed by `rename` (any other token as it is).
pub(super) fn renamed(token: Token, rename: impl Fn(u8) -> u8) -> Token {
    let mut bytes = *token.as_bytes();
    match owner(&bytes) {
        Some(client) => {
            bytes[0] = rename(client);
            Token::from_bytes(bytes)
        }
        None => token,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_owner_and_only_a_model_token_has_one() {
        let token = model_token(2, 300);
        assert_eq!(owner(token.as_bytes()), Some(2));
        assert_ne!(model_token(2, 1), model_token(1, 2));
        assert_eq!(owner(&[0; 16]), None);
        assert_eq!(owner(&token.as_bytes()[..15]), None);
        assert_eq!(renamed(token, |c| c + 1), model_token(3, 300));
    }

    #[test]
    fn a_clients_tokens_share_its_prefix_and_no_one_elses() {
        // The release script and the nodes' store tell another client's waiting mark by it.
        assert!(model_token(1, 1).same_client(&model_token(1, 700)));
        assert!(!model_token(1, 1).same_client(&model_token(2, 1)));
    }
}
