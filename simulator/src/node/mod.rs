//! The simulated nodes: a Redis server's keyspace and what one does to it.
//!
//! | file | job |
//! |---|---|
//! | `store.rs` | the keyspace: keys with absolute expiry on the node's own clock, and the conditional operations of the client's scripts (the model checker's nodes use it too) |
//! | `server.rs` | a simulated server around the store: persistence, crashes, restarts and replication |
//! | `keyspace.rs` | the store opened up as a library, held against a real redis-server by the repository's differential test |

pub mod keyspace;
pub(crate) mod server;
pub(crate) mod store;
