//! `redlock status`: what each node holds for a resource, read directly from the nodes.
//!
//! For each node: the holder's token (first 8 hex characters, as the library logs it), the
//! key's remaining TTL (`PTTL`) and the resource's fence counter when there is one, read in
//! one `MULTI` so the three agree. Then whether one holder has a quorum. The TTL a node
//! shows is not the holder's validity, which is shorter by the drift allowance and the time
//! its acquisition took.

use std::collections::BTreeMap;
use std::time::Duration;

use redlock::core::{LockKey, Token};

use crate::args::StatusArgs;
use crate::duration::show;
use crate::exit::{Failure, NOT_HELD, UNAVAILABLE, USAGE};
use crate::settings::Flags;
use crate::sources;

/// How long one node may take to connect and answer. Generous: `status` is for people and
/// scripts, not on a lease's clock.
const NODE_DEADLINE: Duration = Duration::from_secs(2);

/// What one node holds.
#[derive(Debug)]
struct Held {
    /// The value under the lock key, if any.
    holder: Option<Vec<u8>>,
    /// `PTTL` of the lock key: milliseconds, -1 without expiry, -2 when absent.
    pttl: i64,
    /// The fence counter, if any.
    fence: Option<String>,
}

/// Shows the resource's state; returns 0 when a quorum holds it, 1 when not, 69 when too
/// few nodes answered to tell.
pub(crate) async fn status(args: StatusArgs) -> Result<u8, Failure> {
    let settings = sources::from_sources(&args.nodes, Flags::from_node_args(&args.nodes))?;
    // Building the client checks the URLs and the prefix, and yields the addresses without
    // credentials that everything below prints.
    let redlock = settings.client()?;
    let key = LockKey::new(redlock.key_prefix(), &args.resource)
        .map_err(|e| Failure::new(USAGE, format!("invalid resource name: {e}")))?;
    let urls: Vec<&str> = settings.nodes.iter().map(|n| n.value.as_str()).collect();
    let answers = futures::future::join_all(urls.iter().map(|url| query(url, &key))).await;
    let addresses: Vec<&str> = redlock.node_addresses().collect();
    let quorum = redlock.config().quorum();

    let width = addresses.iter().map(|a| a.len()).max().unwrap_or(4).max(4);
    println!("resource `{}` (key {})", args.resource, key.as_str());
    println!("{:width$}  {:8}  {:>12}  FENCE", "NODE", "HOLDER", "TTL");
    let mut holders: BTreeMap<String, usize> = BTreeMap::new();
    let mut answered = 0;
    for (address, answer) in addresses.iter().zip(&answers) {
        match answer {
            Ok(held) => {
                answered += 1;
                let holder = held.holder.as_deref().map(describe_holder);
                if let Some(holder) = &holder {
                    *holders.entry(holder.clone()).or_default() += 1;
                }
                let ttl = match held.pttl {
                    -2 => "-".to_owned(),
                    -1 => "no expiry".to_owned(),
                    ms => show(Duration::from_millis(ms.unsigned_abs())),
                };
                println!(
                    "{address:width$}  {:8}  {ttl:>12}  {}",
                    holder.as_deref().unwrap_or("-"),
                    held.fence.as_deref().unwrap_or("-"),
                );
            }
            Err(problem) => println!("{address:width$}  unreachable: {problem}"),
        }
    }
    let nodes = addresses.len();
    let top = holders.iter().max_by_key(|(_, count)| **count);
    let (summary, code) = match top {
        Some((holder, &count)) if count >= quorum => (
            format!("held by {holder} on {count} of {nodes} nodes (quorum {quorum})"),
            0,
        ),
        _ if answered < quorum => (
            format!("unknown: only {answered} of {nodes} nodes answered, a quorum is {quorum}"),
            UNAVAILABLE,
        ),
        None => (format!("free: no node holds `{}`", args.resource), NOT_HELD),
        Some((holder, &count)) => (
            format!(
                "not held: {holder} is on {count} of {nodes} nodes, short of a quorum \
                 ({quorum}); those keys expire with their TTL"
            ),
            NOT_HELD,
        ),
    };
    println!("{summary}");
    Ok(code)
}

/// A lock token as its first 8 hex characters; anything else is shown as foreign.
fn describe_holder(value: &[u8]) -> String {
    match Token::from_hex(value) {
        Some(token) => token.short(),
        None => "(not a redlock token)".to_owned(),
    }
}

/// Reads the lock key, its TTL and the fence counter from one node. The error text never
/// contains the URL (and so never its password).
async fn query(url: &str, key: &LockKey) -> Result<Held, String> {
    let read = async {
        let client = redis::Client::open(url)?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(NODE_DEADLINE))
            .set_response_timeout(Some(NODE_DEADLINE));
        let mut connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let (holder, pttl, fence): (Option<Vec<u8>>, i64, Option<String>) = redis::pipe()
            .atomic()
            .get(key.as_str())
            .pttl(key.as_str())
            .get(key.fence_key())
            .query_async(&mut connection)
            .await?;
        Ok::<_, redis::RedisError>(Held {
            holder,
            pttl,
            fence,
        })
    };
    match tokio::time::timeout(NODE_DEADLINE, read).await {
        Ok(Ok(held)) => Ok(held),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {}", show(NODE_DEADLINE))),
    }
}
