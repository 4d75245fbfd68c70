//! `redlock status`: who holds a resource, as the library's holder query reads it from
//! every node (read-only) and judges it on a quorum.
//!
//! For each node: the holder's token (first 8 hex characters, as the library logs it), the
//! key's remaining TTL and the resource's fence counter, read in one step so the three
//! agree. Then the verdict: held by one token on a quorum, free, or unknown when too few
//! nodes answered. The TTL a node shows is not the holder's validity, which is shorter by
//! the drift allowance and the time its acquisition took.

use redlock::Redlock;
use redlock::client::DEFAULT_CONNECT_TIMEOUT;
use redlock_core::{
    DEFAULT_TTL, Holder, KeyReading, KeyValue, MAX_TTL, NodeFailure, RestartPolicy, Verdict,
};
use serde::Serialize;

use crate::args::StatusArgs;
use crate::duration::show;
use crate::exit::{Failure, NOT_HELD, UNAVAILABLE, USAGE};
use crate::quarantine::Quarantine;
use crate::settings::{Flags, Setting, Settings};
use crate::sources;

/// Shows the resource's state; returns 0 when a quorum holds it, 1 when not, 69 when too
/// few nodes answered to tell.
pub(crate) async fn status(args: StatusArgs) -> Result<u8, Failure> {
    // The TTL as `run` takes it (flag, environment, config file): it gives the default
    // restart quarantine, so that both judge the nodes by the same rule.
    let flags = Flags {
        ttl: args.ttl,
        ..Flags::from_node_args(&args.nodes)
    };
    let settings = room_for_the_timeout(sources::from_sources(&args.nodes, flags)?);
    // Building the client checks the URLs, the prefix and the per-node timeout, and yields
    // the addresses without credentials that everything below prints.
    let redlock = settings.client()?;
    let key = redlock_core::LockKey::new(redlock.key_prefix(), &args.resource)
        .map_err(|e| Failure::new(USAGE, format!("invalid resource name: {e}")))?;

    // Connections open (and are identified) first, as for `redlock run`, so that the query
    // itself only has to cover a round trip. A per-node timeout that was set bounds the
    // connection too: a node that cannot answer (paused, overloaded) then costs at most
    // twice that timeout.
    let node_timeout = redlock.config().node_timeout();
    let connect_budget = match settings.node_timeout {
        Some(_) => node_timeout,
        None => DEFAULT_CONNECT_TIMEOUT.saturating_add(node_timeout),
    };
    let _ = tokio::time::timeout(connect_budget, redlock.connect()).await;
    let holder = redlock
        .holder(&args.resource)
        .await
        .map_err(|e| Failure::new(crate::exit::for_error(&e), e.to_string()))?;

    let view = View {
        node_timeout,
        resource: &args.resource,
        key: key.as_str(),
        addresses: redlock.node_addresses().collect(),
        holder: &holder,
    };
    if args.json {
        out!("{}", view.json(&settings, &redlock));
    } else {
        out_part!("{}", view.table());
    }
    Ok(view.exit_code())
}

/// `status` takes no lease, so the TTL's only parts in it are to bound the per-node timeout
/// (below a tenth of it) and to give the default restart quarantine. A per-node timeout
/// too long for the TTL, which would be refused for a lease (`--node-timeout 2s` with the
/// default 10 s), gets a TTL that admits it, with the quarantine kept at what the TTL
/// gave.
fn room_for_the_timeout(mut settings: Settings) -> Settings {
    let Some(timeout) = settings.node_timeout.clone() else {
        return settings;
    };
    let ttl = settings.ttl.as_ref().map_or(DEFAULT_TTL, |s| s.value);
    if timeout.value < ttl / 10 {
        return settings;
    }
    if settings.restart_quarantine.is_none() {
        settings.restart_quarantine = Some(Setting {
            value: Quarantine::For(ttl),
            origin: settings
                .ttl
                .as_ref()
                .map_or_else(|| timeout.origin.clone(), |s| s.origin.clone()),
        });
    }
    // A timeout so long that no TTL admits it is still refused, naming its origin.
    settings.ttl = Some(Setting {
        value: timeout.value.saturating_mul(20).min(MAX_TTL),
        origin: timeout.origin,
    });
    settings
}

/// What `status` prints, from the query's answer.
struct View<'a> {
    /// The per-node timeout, to say what a node that timed out missed.
    node_timeout: std::time::Duration,
    resource: &'a str,
    key: &'a str,
    addresses: Vec<&'a str>,
    holder: &'a Holder,
}

impl View<'_> {
    fn exit_code(&self) -> u8 {
        match self.holder.verdict() {
            Verdict::Held { .. } => 0,
            Verdict::Free { .. } => NOT_HELD,
            _ => UNAVAILABLE,
        }
    }

    /// One line: the verdict in words.
    fn summary(&self) -> String {
        let total = self.holder.nodes().len();
        let quorum = self.holder.quorum();
        let answered = self.holder.answered();
        match self.holder.verdict() {
            Verdict::Held {
                value,
                nodes,
                expires_in,
                fence,
            } => {
                let mut line =
                    format!("held by {value} on {nodes} of {total} nodes (quorum {quorum})");
                match expires_in {
                    Some(left) => {
                        line.push_str(&format!(", expiring in {} unless extended", show(left)));
                    }
                    None => line.push_str(", without expiry"),
                }
                if let Some(fence) = fence {
                    line.push_str(&format!(", fence {fence}"));
                }
                line
            }
            Verdict::Free { leftover: None } if answered == total => {
                format!("free: no node holds `{}`", self.resource)
            }
            Verdict::Free { leftover: None } => format!(
                "free: none of the {answered} nodes that answered holds `{}`, and the {} that \
                 did not cannot make a quorum ({quorum})",
                self.resource,
                total - answered
            ),
            Verdict::Free {
                leftover: Some((value, count)),
            } => format!(
                "not held: {value} is on {count} of {total} nodes, short of a quorum ({quorum}); \
                 those keys expire with their TTL"
            ),
            Verdict::Unknown { answered, .. } if answered < quorum && self.left_out() > 0 => {
                let counted = if answered == 0 {
                    format!("none of the {total} nodes counted")
                } else {
                    format!("only {answered} of {total} nodes counted")
                };
                format!(
                    "unknown: {counted}, a quorum is {quorum}: {}",
                    self.missing()
                )
            }
            Verdict::Unknown { answered, .. } if answered < quorum => {
                format!("unknown: only {answered} of {total} nodes answered, a quorum is {quorum}")
            }
            Verdict::Unknown { strongest, .. } => {
                let (value, count) = strongest
                    .map_or(("nobody".to_owned(), 0), |(value, count)| {
                        (value.to_string(), count)
                    });
                format!(
                    "unknown: {value} is on {count} of {total} nodes and {}: they may hold it \
                     too (quorum {quorum})",
                    self.missing()
                )
            }
            // A verdict of a newer library.
            _ => "unknown".to_owned(),
        }
    }

    /// How many nodes answered but were not asked: the restart quarantine left them out.
    fn left_out(&self) -> usize {
        self.holder
            .nodes()
            .iter()
            .filter(|answer| matches!(answer, Err(NodeFailure::Quarantined { .. })))
            .count()
    }

    /// The nodes without a reading, in words: those the quarantine left out (they answered)
    /// and those that did not answer.
    fn missing(&self) -> String {
        let total = self.holder.nodes().len();
        let left_out = self.left_out();
        let silent = total - self.holder.answered() - left_out;
        let are = |n: usize| if n == 1 { "is" } else { "are" };
        match (left_out, silent) {
            (0, silent) => format!("{silent} did not answer"),
            (left_out, 0) => format!(
                "{left_out} answered but {} left out by the restart quarantine",
                are(left_out)
            ),
            (left_out, silent) => format!(
                "{left_out} answered but {} left out by the restart quarantine, and {silent} \
                 did not answer",
                are(left_out)
            ),
        }
    }

    /// The table: a header line, one row per node, the summary.
    fn table(&self) -> String {
        let width = self
            .addresses
            .iter()
            .map(|a| a.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let mut out = format!("resource `{}` (key {})\n", self.resource, self.key);
        out.push_str(&format!(
            "{:width$}  {:8}  {:>12}  FENCE\n",
            "NODE", "HOLDER", "TTL"
        ));
        for (address, answer) in self.addresses.iter().zip(self.holder.nodes()) {
            match answer {
                Ok(reading) => {
                    let holder = reading.value.map_or("-".to_owned(), |v| v.to_string());
                    let ttl = match (reading.value, reading.expires_in) {
                        (None, _) => "-".to_owned(),
                        (Some(_), None) => "no expiry".to_owned(),
                        (Some(_), Some(left)) => show(left),
                    };
                    let fence = reading.fence.map_or("-".to_owned(), |f| f.to_string());
                    out.push_str(&format!(
                        "{address:width$}  {holder:8}  {ttl:>12}  {fence}\n"
                    ));
                }
                Err(failure) => {
                    out.push_str(&format!(
                        "{address:width$}  {}\n",
                        describe_failure(failure, self.node_timeout)
                    ));
                }
            }
        }
        out.push_str(&self.summary());
        out.push('\n');
        out
    }

    /// The whole answer as one JSON document.
    fn json(&self, settings: &Settings, redlock: &Redlock) -> String {
        let config = redlock.config();
        let quarantine = match &settings.restart_quarantine {
            Some(setting) => setting.value.as_option(),
            None => RestartPolicy::default_for(config.ttl()).quarantine(),
        };
        let (verdict, holder, leftover) = match self.holder.verdict() {
            Verdict::Held {
                value,
                nodes,
                expires_in,
                fence,
            } => (
                "held",
                Some(HolderJson {
                    value: ValueJson::of(value),
                    nodes,
                    expires_in_ms: expires_in.map(|d| d.as_millis()),
                    fence,
                }),
                None,
            ),
            Verdict::Free { leftover } => ("free", None, leftover),
            Verdict::Unknown { strongest, .. } => ("unknown", None, strongest),
            _ => ("unknown", None, None),
        };
        let document = StatusJson {
            resource: self.resource,
            key: self.key,
            verdict,
            exit_code: self.exit_code(),
            summary: self.summary(),
            holder,
            leftover: leftover.map(|(value, nodes)| LeftoverJson {
                value: ValueJson::of(value),
                nodes,
            }),
            answered: self.holder.answered(),
            settings: SettingsJson {
                nodes: config.nodes(),
                quorum: config.quorum(),
                node_timeout_ms: config.node_timeout().as_millis(),
                restart_quarantine_ms: quarantine.map(|q| q.as_millis()),
                key_prefix: redlock.key_prefix(),
            },
            nodes: self
                .addresses
                .iter()
                .zip(self.holder.nodes())
                .map(|(address, answer)| NodeJson::of(address, answer))
                .collect(),
        };
        serde_json::to_string_pretty(&document).unwrap_or_else(|e| {
            // Every field is plain data; this cannot fail, but a report is better than a panic.
            format!("{{\"error\": \"cannot encode the status: {e}\"}}")
        })
    }
}

/// A node that gave no reading, for its row.
fn describe_failure(failure: &NodeFailure, node_timeout: std::time::Duration) -> String {
    match failure {
        NodeFailure::Quarantined { remaining } => format!(
            "quarantined: started or restarted recently (it may have lost keys); not counted \
             for another {}",
            show(*remaining)
        ),
        NodeFailure::TimedOut => {
            format!("unreachable: no answer within {}", show(node_timeout))
        }
        other => format!("unreachable: {other}"),
    }
}

#[derive(Serialize)]
struct StatusJson<'a> {
    resource: &'a str,
    key: &'a str,
    /// `held`, `free` or `unknown`.
    verdict: &'static str,
    exit_code: u8,
    summary: String,
    /// The value held on a quorum, when `verdict` is `held`.
    holder: Option<HolderJson>,
    /// The value on most nodes when no value holds a quorum.
    leftover: Option<LeftoverJson>,
    answered: usize,
    settings: SettingsJson<'a>,
    nodes: Vec<NodeJson<'a>>,
}

/// A lock key's value: a token (all 32 hex digits, as `--fence-env`'s `NAME_OWNER` has it),
/// or `null` with `foreign` set for a value that is not a token.
#[derive(Serialize)]
struct ValueJson {
    token: Option<String>,
    foreign: bool,
}

impl ValueJson {
    fn of(value: KeyValue) -> Self {
        match value {
            KeyValue::Token(token) => Self {
                token: Some(token.to_string()),
                foreign: false,
            },
            // A value of a newer library counts as foreign.
            _ => Self {
                token: None,
                foreign: true,
            },
        }
    }
}

#[derive(Serialize)]
struct HolderJson {
    #[serde(flatten)]
    value: ValueJson,
    nodes: usize,
    /// `null` when a quorum of its keys has no expiry.
    expires_in_ms: Option<u128>,
    fence: Option<u64>,
}

#[derive(Serialize)]
struct LeftoverJson {
    #[serde(flatten)]
    value: ValueJson,
    nodes: usize,
}

#[derive(Serialize)]
struct SettingsJson<'a> {
    nodes: usize,
    quorum: usize,
    node_timeout_ms: u128,
    /// `null` when the quarantine is off.
    restart_quarantine_ms: Option<u128>,
    key_prefix: &'a str,
}

#[derive(Serialize)]
struct NodeJson<'a> {
    node: &'a str,
    answered: bool,
    /// Whether the lock key exists.
    key: bool,
    token: Option<String>,
    foreign: bool,
    /// `null` without a key, or for a key without expiry.
    ttl_ms: Option<u128>,
    fence: Option<u64>,
    /// Why the node gave no reading.
    error: Option<String>,
    quarantined: bool,
}

impl<'a> NodeJson<'a> {
    fn of(node: &'a str, answer: &Result<KeyReading, NodeFailure>) -> Self {
        match answer {
            Ok(reading) => {
                let value = reading.value.map(ValueJson::of);
                Self {
                    node,
                    answered: true,
                    key: value.is_some(),
                    foreign: value.as_ref().is_some_and(|v| v.foreign),
                    token: value.and_then(|v| v.token),
                    ttl_ms: reading.expires_in.map(|d| d.as_millis()),
                    fence: reading.fence,
                    error: None,
                    quarantined: false,
                }
            }
            Err(failure) => Self {
                node,
                answered: false,
                key: false,
                token: None,
                foreign: false,
                ttl_ms: None,
                fence: None,
                error: Some(failure.to_string()),
                quarantined: matches!(failure, NodeFailure::Quarantined { .. }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use redlock_core::Token;

    fn token(byte: u8) -> Token {
        Token::from_bytes([byte; 16])
    }

    fn held(byte: u8, ms: u64) -> Result<KeyReading, NodeFailure> {
        Ok(KeyReading {
            value: Some(KeyValue::Token(token(byte))),
            expires_in: Some(Duration::from_millis(ms)),
            fence: Some(4),
        })
    }

    fn view(holder: &Holder) -> View<'_> {
        View {
            node_timeout: Duration::from_millis(200),
            resource: "report",
            key: "redlock:report",
            addresses: vec!["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"],
            holder,
        }
    }

    #[test]
    fn a_long_node_timeout_gets_a_ttl_that_admits_it_and_keeps_the_quarantine() {
        use crate::settings::Origin;
        let flag = |value| Setting {
            value,
            origin: Origin::Flag("--node-timeout"),
        };
        let short = room_for_the_timeout(Settings {
            node_timeout: Some(flag(Duration::from_millis(200))),
            ..Settings::default()
        });
        assert!(short.ttl.is_none() && short.restart_quarantine.is_none());
        let long = room_for_the_timeout(Settings {
            node_timeout: Some(flag(Duration::from_secs(2))),
            ..Settings::default()
        });
        assert_eq!(long.ttl.map(|s| s.value), Some(Duration::from_secs(40)));
        assert_eq!(
            long.restart_quarantine.map(|s| s.value),
            Some(Quarantine::For(DEFAULT_TTL))
        );
        let off = room_for_the_timeout(Settings {
            node_timeout: Some(flag(Duration::from_secs(2))),
            restart_quarantine: Some(Setting {
                value: Quarantine::Off,
                origin: Origin::Flag("--restart-quarantine"),
            }),
            ..Settings::default()
        });
        assert_eq!(
            off.restart_quarantine.map(|s| s.value),
            Some(Quarantine::Off)
        );
        let endless = room_for_the_timeout(Settings {
            node_timeout: Some(flag(MAX_TTL)),
            ..Settings::default()
        });
        assert_eq!(endless.ttl.map(|s| s.value), Some(MAX_TTL));
    }

    #[test]
    fn a_held_resource_shows_its_rows_and_summary() {
        let holder = Holder::judge(vec![
            held(0xab, 9_500),
            held(0xab, 9_400),
            Err(NodeFailure::TimedOut),
        ]);
        let view = view(&holder);
        assert_eq!(view.exit_code(), 0);
        let table = view.table();
        assert!(
            table.contains("127.0.0.1:7001  abababab      9s 500ms  4\n"),
            "{table}"
        );
        assert!(
            table.contains("127.0.0.1:7003  unreachable: no answer within 200ms"),
            "{table}"
        );
        assert!(
            table.ends_with(
                "held by abababab on 2 of 3 nodes (quorum 2), expiring in 9s 400ms unless \
                 extended, fence 4\n"
            ),
            "{table}"
        );
    }

    #[test]
    fn free_leftover_and_unknown_summaries_and_codes() {
        let free = Holder::judge(vec![Ok(KeyReading::FREE); 3]);
        assert_eq!(view(&free).summary(), "free: no node holds `report`");
        assert_eq!(view(&free).exit_code(), NOT_HELD);
        let quarantined = Err(NodeFailure::Quarantined {
            remaining: Duration::from_secs(3),
        });
        let leftover = Holder::judge(vec![
            held(1, 10),
            Ok(KeyReading::FREE),
            Ok(KeyReading::FREE),
        ]);
        assert!(
            view(&leftover)
                .summary()
                .starts_with("not held: 01010101 is on 1 of 3 nodes")
        );
        assert_eq!(view(&leftover).exit_code(), NOT_HELD);
        let unknown = Holder::judge(vec![held(1, 10), quarantined.clone(), quarantined.clone()]);
        assert_eq!(
            view(&unknown).summary(),
            "unknown: only 1 of 3 nodes counted, a quorum is 2: 2 answered but are left out by \
             the restart quarantine"
        );
        let silent = Err(NodeFailure::TimedOut);
        let mixed = Holder::judge(vec![quarantined, silent.clone(), silent]);
        assert_eq!(
            view(&mixed).summary(),
            "unknown: none of the 3 nodes counted, a quorum is 2: 1 answered but is left out \
             by the restart quarantine, and 2 did not answer"
        );
        assert_eq!(view(&unknown).exit_code(), UNAVAILABLE);
        assert!(view(&unknown).table().contains(
            "127.0.0.1:7002  quarantined: started or restarted recently (it may have lost keys); \
             not counted for another 3s"
        ));
    }
}
