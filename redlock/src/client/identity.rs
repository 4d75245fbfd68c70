//! Reading a connection's server identity (`run_id`, uptime, eviction policy) from `INFO`.

use redis::aio::MultiplexedConnection;

use super::wire::classify;
use crate::core::{NodeFailure, NodeIdentity};

/// What one `INFO` on a new connection tells: the identity, why it cannot be known (the node
/// answered, but not with a usable identity), or a failure of the connection itself.
pub(crate) async fn read(
    connection: &mut MultiplexedConnection,
) -> Result<Result<NodeIdentity, String>, NodeFailure> {
    // The default sections hold both `server` (run_id, uptime) and `memory` (the policy);
    // older servers take only one section name.
    let info: Result<String, _> = redis::cmd("INFO").query_async(connection).await;
    match info {
        Ok(text) => Ok(NodeIdentity::from_info(&text)),
        Err(error) => match classify(error) {
            // The node answered: INFO is refused (an ACL without `+info`) or unknown (renamed).
            NodeFailure::Server(why) | NodeFailure::Denied(why) | NodeFailure::Protocol(why) => {
                Ok(Err(why))
            }
            failure => Err(failure),
        },
    }
}
