//! Reading a connection's server identity (`run_id`, uptime, eviction policy) from `INFO`.

use std::time::Duration;

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
        Ok(text) => Ok(parse(&text)),
        Err(error) => match classify(error) {
            // The node answered: INFO is refused (an ACL without `+info`) or unknown (renamed).
            NodeFailure::Server(why) | NodeFailure::Denied(why) | NodeFailure::Protocol(why) => {
                Ok(Err(why))
            }
            failure => Err(failure),
        },
    }
}

/// The identity in an `INFO` reply, or what is missing from it.
pub(crate) fn parse(info: &str) -> Result<NodeIdentity, String> {
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let run_id = field("run_id")
        .filter(|id| !id.is_empty())
        .ok_or_else(|| "INFO has no run_id (a proxy in front of the node?)".to_owned())?;
    let uptime = field("uptime_in_seconds")
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
        .ok_or_else(|| "INFO has no uptime_in_seconds".to_owned())?;
    Ok(NodeIdentity {
        run_id: run_id.to_owned(),
        uptime,
        maxmemory_policy: field("maxmemory_policy").map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_of_an_info_reply() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc123\r\nuptime_in_seconds:42\r\n\
                    # Memory\r\nmaxmemory_policy:allkeys-lru\r\n";
        assert_eq!(
            parse(info),
            Ok(NodeIdentity {
                run_id: "abc123".into(),
                uptime: Duration::from_secs(42),
                maxmemory_policy: Some("allkeys-lru".into()),
            })
        );
        assert!(parse("# Server\r\nuptime_in_seconds:1\r\n").is_err());
        assert!(parse("run_id:x\r\nuptime_in_seconds:soon\r\n").is_err());
    }
}
