//! The judgement: pure functions from what was observed ([`NodeObservation`]) and the
//! settings ([`Limits`]) to findings, each naming the guarantee condition it touches and the
//! simulator scenario that shows the consequence.

use std::collections::BTreeMap;
use std::time::Duration;

use redlock::core::quarantine_left;

use super::catalogue::{self, Condition};
use super::clock::{self, ClockEstimate, StartStep};
use super::finding::{Check, Finding, Level};
use super::observe::{Limits, NodeObservation, Role, ServerInfo, version_numbers};
use super::permissions::{Grant, Operation, grant_for};
use super::report::{NodeSummary, Report, RoundTrips, SettingsSummary, Verdict};
use crate::duration::show;
use crate::numbers::{ms, pct, signed_pct, signed_us, us};

/// The worst clock rate the doctor calls "well inside" the drift factor, as a share of it:
/// the factor also covers the clients' clocks.
const RATE_MARGIN: f64 = 0.5;

/// An offset from this host's clock beyond which a node's clock is called unsynchronised.
const OFFSET_LIMIT: Duration = Duration::from_secs(1);

/// Judges every node and the fleet. `config_warnings` are the library's warnings about the
/// configuration, with the condition each touches.
pub(crate) fn judge(
    limits: &Limits,
    observations: &[NodeObservation],
    config_warnings: &[(Condition, String)],
) -> Report {
    let mut findings = Vec::new();
    for (condition, warning) in config_warnings {
        findings.push(Finding::new(
            Level::Warning,
            Check::Configuration,
            *condition,
            warning.clone(),
        ));
    }
    if let Some(quarantine) = limits.quarantine
        && quarantine < limits.ttl
    {
        findings.push(
            Finding::new(
                Level::Error,
                Check::Configuration,
                Condition::Memory,
                format!(
                    "the restart quarantine ({}) is shorter than the TTL ({}): a node that \
                     restarts empty votes again while leases it forgot are still valid",
                    show(quarantine),
                    show(limits.ttl)
                ),
            )
            .shown_by(catalogue::RL06B_SHORT_QUARANTINE)
            .remedy("set --restart-quarantine to at least the longest TTL of any client"),
        );
    }

    let mut first_of_server: BTreeMap<&str, &str> = BTreeMap::new();
    let mut nodes = Vec::with_capacity(observations.len());
    for observation in observations {
        let duplicate_of = observation.server().and_then(|server| {
            match first_of_server.get(server.run_id.as_str()) {
                Some(first) => Some(*first),
                None => {
                    first_of_server.insert(&server.run_id, &observation.address);
                    None
                }
            }
        });
        let estimate = match &observation.clock {
            Some(Ok(samples)) => {
                let mut estimate = clock::estimate(samples);
                if limits.clock_window.is_zero() {
                    // Back-to-back samples: an offset, but no rate or step worth a judgement.
                    estimate.rate = None;
                    estimate.steps.clear();
                }
                Some(estimate)
            }
            _ => None,
        };
        findings.extend(judge_node(
            limits,
            observation,
            duplicate_of,
            estimate.as_ref(),
        ));
        nodes.push(NodeSummary::of(limits, observation, estimate));
    }
    let reachable = observations.iter().filter(|o| o.is_reachable()).count();
    findings.extend(judge_fleet(limits, observations, reachable));

    let verdict = if reachable < limits.quorum {
        Verdict::Unchecked
    } else if findings.iter().any(|f| f.level == Level::Error) {
        Verdict::Failing
    } else {
        Verdict::Healthy
    };
    Report {
        verdict,
        exit_code: verdict.exit_code(),
        settings: SettingsSummary::of(limits),
        nodes,
        findings,
    }
}

fn judge_node(
    limits: &Limits,
    node: &NodeObservation,
    duplicate_of: Option<&str>,
    estimate: Option<&ClockEstimate>,
) -> Vec<Finding> {
    let address = node.address.as_str();
    if let Err(why) = &node.reached {
        let (summary, remedy) = if grant_for(why, &limits.key_prefix) == Grant::Credentials {
            (
                format!("refuses this client's credentials: {why}"),
                "fix the user name and password in the node's URL",
            )
        } else {
            (
                format!("unreachable: {why}"),
                "start the node, or fix its address or the network between it and the clients",
            )
        };
        return vec![
            Finding::new(
                Level::Error,
                Check::Reachability,
                Condition::Availability,
                format!("{summary}; the fleet tolerates one failed node fewer"),
            )
            .at(address)
            .shown_by(catalogue::RL13A_MINORITY)
            .remedy(remedy),
        ];
    }
    let mut findings = Vec::new();
    findings.extend(judge_latency(limits, node).map(|f| f.at(address)));
    match &node.info {
        Some(Ok(server)) => {
            findings.extend(
                judge_server(limits, node, server, duplicate_of)
                    .into_iter()
                    .map(|f| f.at(address)),
            );
        }
        Some(Err(why)) => {
            let denied = matches!(grant_for(why, &limits.key_prefix), Grant::Command(_));
            let finding = if denied {
                Finding::new(
                    Level::Error,
                    Check::Permissions,
                    Condition::Memory,
                    format!(
                        "refuses INFO ({why}): clients cannot see it restart, so every \
                         reconnection leaves it out for a whole quarantine, and role, \
                         persistence, uptime and eviction cannot be checked"
                    ),
                )
                .shown_by(catalogue::RL05B_FRESH_CLIENT)
                .remedy("ACL SETUSER <user> +info")
            } else {
                Finding::new(
                    Level::Warning,
                    Check::Role,
                    Condition::Memory,
                    format!(
                        "no usable INFO ({why}): role, persistence, uptime and eviction \
                         cannot be checked"
                    ),
                )
                .shown_by(catalogue::RL05_NO_PERSISTENCE)
            };
            findings.push(finding.at(address));
        }
        None => {}
    }
    findings.extend(
        judge_clock(limits, node, estimate)
            .into_iter()
            .map(|f| f.at(address)),
    );
    findings.extend(judge_permissions(limits, node).map(|f| f.at(address)));
    findings.extend(judge_waiting(limits, node).map(|f| f.at(address)));
    findings
}

fn judge_latency(limits: &Limits, node: &NodeObservation) -> Option<Finding> {
    let trips = RoundTrips::of(&node.round_trips)?;
    let timeout_ms = limits.node_timeout.as_secs_f64() * 1e3;
    let ttl_ms = limits.ttl.as_secs_f64() * 1e3;
    let numbers = format!(
        "round trips p50 {}, p99 {} over {} samples, against a per-node timeout of {} and a \
         TTL of {} (p99 is {:.2} % of it)",
        ms(trips.p50_ms),
        ms(trips.p99_ms),
        trips.samples,
        show(limits.node_timeout),
        show(limits.ttl),
        trips.p99_ms / ttl_ms * 100.0,
    );
    let finding = if trips.p50_ms >= timeout_ms {
        Finding::new(
            Level::Error,
            Check::Latency,
            Condition::Availability,
            format!("{numbers}: most requests to it time out, so it cannot vote"),
        )
        .remedy("raise --node-timeout (below a tenth of the TTL) or move the node closer")
    } else if trips.p99_ms > timeout_ms / 2.0 {
        Finding::new(
            Level::Warning,
            Check::Latency,
            Condition::Availability,
            format!(
                "{numbers}: above half the timeout, acquisitions will fail when the node \
                 is loaded"
            ),
        )
        .remedy("raise --node-timeout (below a tenth of the TTL) or move the node closer")
    } else {
        Finding::new(Level::Ok, Check::Latency, Condition::Availability, numbers)
    };
    Some(finding.shown_by(catalogue::RL12_SLOW_REPLIES))
}

fn judge_server(
    limits: &Limits,
    node: &NodeObservation,
    server: &ServerInfo,
    duplicate_of: Option<&str>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    findings.push(match &server.role {
        Role::Master { replicas: 0 } => Finding::new(
            Level::Ok,
            Check::Role,
            Condition::Independence,
            "a master without replicas",
        )
        .shown_by(catalogue::RL07_FAILOVER),
        Role::Master { replicas } => Finding::new(
            Level::Error,
            Check::Role,
            Condition::Memory,
            format!(
                "a master with {replicas} connected replica(s): a failover promotes a replica \
                 that may lack lock keys this master acknowledged, and a Sentinel split brain \
                 lets two masters grant the same lease"
            ),
        )
        .shown_by(catalogue::RL08B_SPLIT_BRAIN)
        .remedy(
            "use independent masters without replication; if replicas must stay, disable \
             automatic failover and keep a promoted node out of every client for the longest \
             TTL: a running client leaves a known name that now reaches another server out \
             for a whole restart quarantine, but a client started after the promotion (every \
             redlock run) counts it at once",
        ),
        Role::Replica { master } => Finding::new(
            Level::Error,
            Check::Role,
            Condition::Memory,
            format!(
                "a replica of {master}: it refuses lock writes, and a promoted replica may \
                 lack keys its master acknowledged; Redlock needs independent masters"
            ),
        )
        .shown_by(catalogue::RL07_FAILOVER)
        .remedy("list independent masters only; never a replica"),
        Role::Other(role) => Finding::new(
            Level::Error,
            Check::Role,
            Condition::Independence,
            format!("role `{role}`: not a master that can hold lock keys"),
        )
        .remedy("list independent masters only"),
    });

    if version_numbers(&server.version) < [7, 0, 0] {
        findings.push(
            Finding::new(
                Level::Error,
                Check::Version,
                Condition::Availability,
                format!(
                    "Redis {}: the lock request `SET … NX GET PX` needs 7.0 or later",
                    server.version
                ),
            )
            .remedy("upgrade the node"),
        );
    } else {
        findings.push(Finding::new(
            Level::Ok,
            Check::Version,
            Condition::Availability,
            format!("Redis {}", server.version),
        ));
    }

    if let Some(first) = duplicate_of {
        findings.push(
            Finding::new(
                Level::Error,
                Check::SameServer,
                Condition::Independence,
                format!(
                    "the same server as {first} (run_id {}…): one server must not vote twice; \
                     the client refuses this name for good, so the fleet has one voter fewer \
                     than its {} names suggest",
                    &server.run_id[..server.run_id.len().min(8)],
                    limits.nodes
                ),
            )
            .shown_by(catalogue::RL13A_MINORITY)
            .remedy("list each server once, under one name"),
        );
    }

    findings.push(judge_persistence(limits, node, server));

    if let Some(quarantine) = limits.quarantine {
        // The client's own rule: the uptime a node reports can read up to a second high.
        let left = quarantine_left(quarantine, server.uptime);
        if !left.is_zero() {
            findings.push(
                Finding::new(
                    Level::Warning,
                    Check::Uptime,
                    Condition::Memory,
                    format!(
                        "up {}, within the restart quarantine ({}): it may have restarted \
                         without its keys, so a client that meets it now leaves it out of \
                         quorums for another {}",
                        show(server.uptime),
                        show(quarantine),
                        show(left)
                    ),
                )
                .shown_by(catalogue::RL06_SHORT)
                .remedy("nothing, if the node was just started: the quarantine ends by itself"),
            );
        } else {
            findings.push(
                Finding::new(
                    Level::Ok,
                    Check::Uptime,
                    Condition::Memory,
                    format!(
                        "up {}, past the restart quarantine ({})",
                        show(server.uptime),
                        show(quarantine)
                    ),
                )
                .shown_by(catalogue::RL06_LONG),
            );
        }
    }

    if let Some(age) = node.process_age {
        findings.push(judge_uptime_clock(limits, server.uptime, age));
    }

    findings.push(match server.maxmemory_policy.as_deref() {
        Some("noeviction") => Finding::new(
            Level::Ok,
            Check::Eviction,
            Condition::Memory,
            "maxmemory-policy noeviction: keys are never evicted",
        )
        .shown_by(catalogue::RL05_NO_PERSISTENCE),
        Some(policy) => {
            let limit = match server.maxmemory {
                Some(0) => " (maxmemory 0 today: eviction starts once a limit is set)".to_owned(),
                Some(bytes) => format!(" (maxmemory {bytes} bytes)"),
                None => String::new(),
            };
            Finding::new(
                Level::Error,
                Check::Eviction,
                Condition::Memory,
                format!(
                    "maxmemory-policy {policy}{limit}: under memory pressure the node evicts \
                     keys, lock keys and fence counters included, and forgets them as a crash \
                     without persistence does"
                ),
            )
            .shown_by(catalogue::RL05_NO_PERSISTENCE)
            .remedy("CONFIG SET maxmemory-policy noeviction, and the same in redis.conf")
        }
        None => Finding::new(
            Level::Warning,
            Check::Eviction,
            Condition::Memory,
            "INFO does not give maxmemory_policy: eviction cannot be checked",
        )
        .shown_by(catalogue::RL05_NO_PERSISTENCE),
    });
    findings
}

/// `uptime` (`INFO`, wall clock) against `age` (the process's age on this host's boot-time
/// clock): a wall clock stepped forward since the server started makes the uptime read
/// high, and the restart quarantine, which counts from it, ends early or not at all.
fn judge_uptime_clock(limits: &Limits, uptime: Duration, age: Duration) -> Finding {
    let ages = format!(
        "INFO's uptime {} (wall clock), the process's age {} (this host's boot-time clock)",
        show(uptime),
        show(age)
    );
    match clock::start_step(uptime, age) {
        StartStep::None => Finding::new(
            Level::Ok,
            Check::UptimeClock,
            Condition::Memory,
            format!("{ages}: the wall clock was not stepped since the server started"),
        )
        .shown_by(catalogue::RL05_QUARANTINE),
        StartStep::Forward(by) => {
            let effect = match limits.quarantine {
                Some(quarantine) => format!(
                    "the uptime reads {} high, so after a restart without persistence the \
                     restart quarantine ({}) ends that much early, or at once, while leases \
                     the node forgot are still valid",
                    show(by),
                    show(quarantine)
                ),
                None => format!(
                    "the uptime reads {} high; with the quarantine off that matters only if \
                     it is turned on, but a step forward also expires lock keys early",
                    show(by)
                ),
            };
            Finding::new(
                Level::Warning,
                Check::UptimeClock,
                Condition::Memory,
                format!(
                    "{ages}: the wall clock was stepped forward by {} since the server started \
                     (a time daemon's step at boot, typically); {effect}",
                    show(by)
                ),
            )
            .shown_by(catalogue::RL05_NO_PERSISTENCE)
            .remedy(
                "start redis-server only once the clock is synchronised (systemd: \
                 After=time-sync.target and Wants=time-sync.target, with chrony-wait or \
                 systemd-time-wait-sync enabled), or allow no clock steps on lock nodes; see \
                 operations.md",
            )
        }
        StartStep::Backward(by) => Finding::new(
            Level::Note,
            Check::UptimeClock,
            Condition::Clocks,
            format!(
                "{ages}: the wall clock was stepped back by {} since the server started; the \
                 uptime reads low, which only lengthens the restart quarantine",
                show(by)
            ),
        )
        .shown_by(catalogue::RL04B_STEP_BACKWARD)
        .remedy("allow no clock steps on lock nodes: slew only (operations.md)"),
    }
}

fn judge_persistence(limits: &Limits, node: &NodeObservation, server: &ServerInfo) -> Finding {
    let fsync = match &node.appendfsync {
        Some(Ok(policy)) => Ok(policy.as_str()),
        Some(Err(why)) => Err(why.as_str()),
        None => Err("not read"),
    };
    let finding = |level, summary: String| {
        Finding::new(level, Check::Persistence, Condition::Memory, summary)
    };
    if server.aof_enabled && fsync == Ok("always") {
        return finding(
            Level::Ok,
            "appendonly yes, appendfsync always: a crash loses no acknowledged key".into(),
        )
        .shown_by(catalogue::RL05_ALWAYS);
    }
    let (what, scenario) = match (server.aof_enabled, fsync) {
        (false, _) => (
            "no append-only file (appendonly no): a crash loses every lock key".to_owned(),
            catalogue::RL05_NO_PERSISTENCE,
        ),
        (true, Ok(policy)) => (
            format!(
                "appendfsync {policy}: a crash loses the keys written since the last fsync \
                 (up to a second)"
            ),
            catalogue::RL05_EVERYSEC,
        ),
        (true, Err(why)) => (
            format!("appendonly yes, appendfsync unknown (CONFIG GET appendfsync: {why})"),
            catalogue::RL05_EVERYSEC,
        ),
    };
    let unknown = server.aof_enabled && fsync.is_err();
    match limits.quarantine {
        Some(quarantine) => finding(
            Level::Note,
            format!(
                "{what}; mitigated: the restart quarantine ({}) keeps a restarted node out of \
                 quorums until the leases it forgot have expired ({})",
                show(quarantine),
                catalogue::RL05_QUARANTINE,
            ),
        )
        .shown_by(scenario)
        .remedy(format!(
            "with quorum-minted fencing tokens use appendfsync always: a delayed restart does \
             not protect fence counters ({})",
            catalogue::FENCE_NO_PERSISTENCE
        )),
        None if unknown => finding(
            Level::Warning,
            format!(
                "{what}; the restart quarantine is off, which is safe only with appendfsync \
                 always"
            ),
        )
        .shown_by(scenario)
        .remedy("check appendfsync by hand, or grant the doctor's user +config|get"),
        None => finding(
            Level::Error,
            format!(
                "{what}, and the restart quarantine is off: the node votes again at once after \
                 a restart, while leases it forgot are still valid"
            ),
        )
        .shown_by(scenario)
        .remedy(
            "appendonly yes with appendfsync always, or a restart quarantine of at least the \
             longest TTL (drop --restart-quarantine off)",
        ),
    }
}

fn judge_clock(
    limits: &Limits,
    node: &NodeObservation,
    estimate: Option<&ClockEstimate>,
) -> Vec<Finding> {
    let drift = limits.drift_factor;
    let mut findings = Vec::new();
    if let Some(Err(why)) = &node.clock {
        let remedy = match grant_for(why, &limits.key_prefix) {
            Grant::Command(rule) => format!("grant the doctor's user {rule}"),
            _ => "check that the node answers TIME".to_owned(),
        };
        findings.push(
            Finding::new(
                Level::Warning,
                Check::ClockRate,
                Condition::Clocks,
                format!("the clock was not checked: TIME failed ({why})"),
            )
            .shown_by(catalogue::RL10_FAST)
            .remedy(remedy),
        );
        return findings;
    }
    let Some(estimate) = estimate else {
        return findings;
    };
    let slew = "run NTP in slew mode on lock nodes (chronyd without makestep after boot, or \
                ntpd -x) and never set their clocks by hand";
    let mut stepped_forward = false;
    for step in &estimate.steps {
        if step.size_ms > 0.0 {
            stepped_forward = true;
            findings.push(
                Finding::new(
                    Level::Error,
                    Check::ClockSteps,
                    Condition::Clocks,
                    format!(
                        "its clock jumped {} forward {:.1} s into the {} window: keys expire \
                         early by as much",
                        ms(step.size_ms),
                        step.at_s,
                        show(limits.clock_window)
                    ),
                )
                .shown_by(catalogue::RL04_STEP_FORWARD)
                .remedy(slew),
            );
        } else {
            findings.push(
                Finding::new(
                    Level::Warning,
                    Check::ClockSteps,
                    Condition::Clocks,
                    format!(
                        "its clock jumped {} backward {:.1} s into the window: harmless to \
                         leases (keys expire late), but something steps this clock",
                        ms(-step.size_ms),
                        step.at_s
                    ),
                )
                .shown_by(catalogue::RL04B_STEP_BACKWARD)
                .remedy(slew),
            );
        }
    }
    if let Some(offset) = estimate.offset {
        let beyond = offset.offset_us.abs() - offset.bound_us;
        let text = format!(
            "clock {} from this host's (±{})",
            signed_us(offset.offset_us),
            us(offset.bound_us)
        );
        findings.push(if beyond > OFFSET_LIMIT.as_secs_f64() * 1e6 {
            Finding::new(
                Level::Warning,
                Check::ClockOffset,
                Condition::Clocks,
                format!(
                    "{text}: this node's clock or this host's is not synchronised; a clock that \
                     far off gets stepped one day, and a node clock stepped forward expires \
                     keys early"
                ),
            )
            .shown_by(catalogue::RL04_STEP_FORWARD)
            .remedy(format!("synchronise both with NTP; {slew}"))
        } else {
            Finding::new(Level::Ok, Check::ClockOffset, Condition::Clocks, text)
                .shown_by(catalogue::RL04_STEP_FORWARD)
        });
    }
    if stepped_forward {
        return findings;
    }
    let Some(rate) = estimate.rate else {
        findings.push(
            if limits.clock_window.is_zero() {
                Finding::new(
                    Level::Note,
                    Check::ClockRate,
                    Condition::Clocks,
                    "the clock's rate was not measured (--clock-window 0s)",
                )
            } else {
                Finding::new(
                Level::Warning,
                Check::ClockRate,
                Condition::Clocks,
                format!(
                    "the clock's rate is unknown: the {} window is too short for its round trips",
                    show(limits.clock_window)
                ),
            )
            .remedy("a longer --clock-window")
            }
            .shown_by(catalogue::RL10_FAST),
        );
        return findings;
    };
    let measured = format!(
        "clock rate {} (±{}) against this host's over {:.1} s, drift factor {}",
        signed_pct(rate.rate),
        pct(rate.bound),
        rate.span_s,
        pct(drift)
    );
    let finding = if rate.lower() > drift {
        Finding::new(
            Level::Error,
            Check::ClockRate,
            Condition::Clocks,
            format!(
                "{measured}: it runs faster than the drift factor allows, so keys expire on it \
                 before the holders' validity ends"
            ),
        )
        .shown_by(catalogue::RL10_FAST)
        .remedy(
            "fix the clock of the node, or of this host (a client clock running slow has the \
             same effect: RL-09), or raise the drift factor",
        )
    } else if rate.upper() > drift {
        let remedy = if rate.bound > drift * RATE_MARGIN {
            format!(
                "the bound is too wide to tell: run with a longer --clock-window (at least {})",
                show(window_for(rate, drift))
            )
        } else {
            "check the node's and this host's time synchronisation".to_owned()
        };
        Finding::new(
            Level::Warning,
            Check::ClockRate,
            Condition::Clocks,
            format!("{measured}: it may run faster than the drift factor allows"),
        )
        .shown_by(catalogue::RL10_FAST)
        .remedy(remedy)
    } else if rate.rate > drift * RATE_MARGIN {
        Finding::new(
            Level::Warning,
            Check::ClockRate,
            Condition::Clocks,
            format!(
                "{measured}: more than half the drift factor, which must also cover the \
                 clients' clocks"
            ),
        )
        .shown_by(catalogue::RL10_FAST)
        .remedy("check the node's and this host's time synchronisation")
    } else if rate.upper() < -drift {
        Finding::new(
            Level::Note,
            Check::ClockRate,
            Condition::Clocks,
            format!("{measured}: it runs slow, so keys live longer on it (harmless to leases)"),
        )
        .shown_by(catalogue::RL10_WITHIN)
    } else {
        Finding::new(Level::Ok, Check::ClockRate, Condition::Clocks, measured)
            .shown_by(catalogue::RL10_WITHIN)
    };
    findings.push(finding);
    findings
}

/// A window long enough to bring `rate`'s bound under half the drift factor.
fn window_for(rate: clock::Rate, drift: f64) -> Duration {
    let needed = rate.span_s * rate.bound / (drift * RATE_MARGIN);
    Duration::from_secs(needed.ceil().clamp(1.0, 3600.0) as u64)
}

fn judge_permissions(limits: &Limits, node: &NodeObservation) -> Option<Finding> {
    let probe = node.probe.as_ref()?;
    let grants = probe.grants(&limits.key_prefix);
    let refused = probe.refused();
    if !grants.is_empty() {
        let operations: Vec<String> = refused.iter().map(ToString::to_string).collect();
        let refuses = |ops: &[Operation]| ops.iter().any(|op| refused.contains(op));
        let mut consequences = Vec::new();
        if refuses(&[Operation::Acquire]) {
            consequences.push("no lease can count on its vote");
        } else if refuses(&[Operation::FencedAcquire, Operation::MultiAcquire]) {
            consequences.push("fenced or multi-resource leases cannot count on its vote");
        }
        if refuses(&[
            Operation::Release,
            Operation::FencedRelease,
            Operation::MultiRelease,
        ]) {
            consequences.push(
                "leases taken on it are never released there: its keys stay until their TTL, \
                 and a plain DEL is no workaround",
            );
        }
        if refuses(&[Operation::Extend, Operation::MultiExtend]) {
            consequences.push("leases cannot be extended on it: long work loses its vote");
        }
        let consequence = consequences.join("; ");
        let credentials = grants.contains(&Grant::Credentials);
        let rules: Vec<String> = grants
            .iter()
            .filter(|g| **g != Grant::Credentials)
            .map(ToString::to_string)
            .collect();
        let mut remedy = Vec::new();
        if !rules.is_empty() {
            remedy.push(format!("ACL SETUSER <user> {}", rules.join(" ")));
        }
        if credentials {
            remedy.push("fix the user name and password in the node's URL".to_owned());
        }
        let mut finding = Finding::new(
            Level::Error,
            Check::Permissions,
            Condition::Availability,
            format!("refuses {}: {consequence}", operations.join(", ")),
        )
        .remedy(remedy.join("; "));
        if refused.contains(&Operation::Release) {
            finding = finding.shown_by(catalogue::RL14_PLAIN_DEL);
        }
        return Some(finding);
    }
    if let Some((operation, why)) = probe.inconclusive() {
        return Some(Finding::new(
            Level::Warning,
            Check::Permissions,
            Condition::Availability,
            format!(
                "permissions not checked: the {operation} on a scratch resource failed ({why})"
            ),
        ));
    }
    Some(Finding::new(
        Level::Ok,
        Check::Permissions,
        Condition::Availability,
        "acquire, extend, release, fenced and multi-resource leases all permitted",
    ))
}

/// The commands a waiter relies on: a refusal only slows waiters down.
fn judge_waiting(limits: &Limits, node: &NodeObservation) -> Option<Finding> {
    let probe = node.probe.as_ref()?;
    if probe.waiting.is_empty() {
        return None;
    }
    let (commands, grants) = probe.waiting_refused(&limits.key_prefix);
    if commands.is_empty() {
        return Some(Finding::new(
            Level::Ok,
            Check::Permissions,
            Condition::Availability,
            "release notifications, the holder's remaining time and probes permitted",
        ));
    }
    let rules: Vec<String> = grants.iter().map(ToString::to_string).collect();
    Some(
        Finding::new(
            Level::Warning,
            Check::Permissions,
            Condition::Availability,
            format!(
                "refuses {}: releases on it notify no waiter and waiters cannot subscribe or                  read the holder's remaining time, so they wake on their retry timers (up to                  the retry delay plus jitter after a release) instead of at once",
                commands.join(", ")
            ),
        )
        .remedy(format!("ACL SETUSER <user> {}", rules.join(" "))),
    )
}

fn judge_fleet(
    limits: &Limits,
    observations: &[NodeObservation],
    reachable: usize,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    if reachable < limits.quorum {
        findings.push(
            Finding::new(
                Level::Error,
                Check::Quorum,
                Condition::Availability,
                format!(
                    "only {reachable} of {} nodes answered; a lease needs {}: the fleet cannot \
                     be checked, nor locked",
                    limits.nodes, limits.quorum
                ),
            )
            .shown_by(catalogue::RL13A_MINORITY),
        );
        return findings;
    }
    // Nodes that can vote at all: reachable masters, each server counted once.
    let mut servers = BTreeMap::new();
    for node in observations.iter().filter(|o| o.is_reachable()) {
        match node.server() {
            Some(server) if matches!(server.role, Role::Master { .. }) => {
                servers
                    .entry(server.run_id.clone())
                    .or_insert(server.uptime);
            }
            Some(_) => {}
            // Without INFO a node can still vote; it only cannot be identified.
            None => {
                servers.insert(format!("unidentified {}", node.address), Duration::MAX);
            }
        }
    }
    let voters = servers.len();
    if voters < limits.quorum {
        findings.push(
            Finding::new(
                Level::Error,
                Check::Quorum,
                Condition::Independence,
                format!(
                    "only {voters} independent masters answer among {} names; a lease needs {}",
                    limits.nodes, limits.quorum
                ),
            )
            .shown_by(catalogue::RL13A_MINORITY),
        );
        return findings;
    }
    if let Some(quarantine) = limits.quarantine {
        let mut waits: Vec<Duration> = servers
            .values()
            .map(|uptime| quarantine_left(quarantine, *uptime))
            .collect();
        waits.sort();
        // The quorum-th shortest wait: when a new client can first count a quorum.
        let wait = waits[limits.quorum - 1];
        if !wait.is_zero() {
            findings.push(
                Finding::new(
                    Level::Warning,
                    Check::Quorum,
                    Condition::Availability,
                    format!(
                        "a client starting now gets no lease for another {}: fewer than {} \
                         nodes are past the restart quarantine",
                        show(wait),
                        limits.quorum
                    ),
                )
                .shown_by(catalogue::RL05B_FRESH_CLIENT),
            );
            return findings;
        }
    }
    findings.push(Finding::new(
        Level::Ok,
        Check::Quorum,
        Condition::Availability,
        format!(
            "{reachable} of {} nodes answer, {voters} independent masters; a lease needs {}",
            limits.nodes, limits.quorum
        ),
    ));
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::clock::TimeSample;
    use crate::doctor::permissions::{Outcome, Probe};

    fn limits() -> Limits {
        Limits {
            nodes: 3,
            quorum: 2,
            ttl: Duration::from_secs(10),
            node_timeout: Duration::from_millis(50),
            drift_factor: 0.01,
            quarantine: Some(Duration::from_secs(10)),
            clock_window: Duration::from_secs(2),
            key_prefix: "redlock:".into(),
        }
    }

    fn server(run_id: &str) -> ServerInfo {
        ServerInfo {
            version: "7.0.15".into(),
            run_id: run_id.into(),
            uptime: Duration::from_secs(3600),
            process_id: None,
            role: Role::Master { replicas: 0 },
            aof_enabled: true,
            maxmemory_policy: Some("noeviction".into()),
            maxmemory: Some(0),
        }
    }

    /// TIME samples every 100 ms over 2 s of a clock running `rate` fast, 0.2 ms round trips.
    fn clock(rate: f64) -> Vec<TimeSample> {
        (0..21)
            .map(|i| {
                let sent_ns = i * 100_000_000;
                let received_ns = sent_ns + 200_000;
                let wall = 1_700_000_000_000_000 + sent_ns / 1_000;
                TimeSample {
                    sent_ns,
                    received_ns,
                    wall_sent_us: wall,
                    wall_received_us: wall + 200,
                    node_us: 1_700_000_000_000_000
                        + ((sent_ns + 100_000) as f64 * (1.0 + rate) / 1e3) as i64,
                }
            })
            .collect()
    }

    fn healthy(address: &str, run_id: &str) -> NodeObservation {
        NodeObservation {
            address: address.into(),
            reached: Ok(()),
            round_trips: vec![Duration::from_micros(200); 26],
            info: Some(Ok(server(run_id))),
            appendfsync: Some(Ok("always".into())),
            clock: Some(Ok(clock(0.0))),
            probe: Some(Probe {
                operations: vec![(Operation::Acquire, Outcome::Done)],
                commands: Vec::new(),
                waiting: Vec::new(),
            }),
            process_age: None,
        }
    }

    fn fleet() -> Vec<NodeObservation> {
        vec![
            healthy("n1:1", "a"),
            healthy("n2:1", "b"),
            healthy("n3:1", "c"),
        ]
    }

    fn problems(report: &Report) -> Vec<(Level, Option<&str>, Check)> {
        report
            .findings
            .iter()
            .filter(|f| f.level > Level::Ok)
            .map(|f| (f.level, f.node.as_deref(), f.check))
            .collect()
    }

    #[test]
    fn a_local_node_whose_clock_was_stepped_since_it_started_is_warned_about() {
        let mut nodes = fleet();
        // n1 started 40 s ago by the boot-time clock; its wall clock then jumped 2 h ahead.
        nodes[0].info = Some(Ok(ServerInfo {
            uptime: Duration::from_secs(2 * 3_600 + 40),
            process_id: Some(4242),
            ..server("a")
        }));
        nodes[0].process_age = Some(Duration::from_millis(40_250));
        // n2 agrees within whole seconds; n3 is remote (no age read): nothing is said.
        nodes[1].process_age = Some(Duration::from_millis(3_600_400));
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(
            problems(&report),
            [(Level::Warning, Some("n1:1"), Check::UptimeClock)]
        );
        let warning = report
            .findings
            .iter()
            .find(|f| f.check == Check::UptimeClock && f.level == Level::Warning)
            .unwrap();
        assert!(
            warning.summary.contains("uptime 2h 40s"),
            "{}",
            warning.summary
        );
        assert!(
            warning.summary.contains("age 40s 250ms"),
            "{}",
            warning.summary
        );
        assert!(
            warning
                .summary
                .contains("stepped forward by 1h 59m 59s 750ms"),
            "{}",
            warning.summary
        );
        assert!(
            warning
                .remedy
                .as_deref()
                .unwrap()
                .contains("After=time-sync.target")
        );
        let checked: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.check == Check::UptimeClock)
            .map(|f| (f.level, f.node.as_deref()))
            .collect();
        assert_eq!(
            checked,
            [(Level::Warning, Some("n1:1")), (Level::Ok, Some("n2:1"))]
        );

        // Stepped back: the quarantine only gets longer; a note.
        nodes[0].process_age = Some(Duration::from_secs(3 * 3_600));
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(
            problems(&report),
            [(Level::Note, Some("n1:1"), Check::UptimeClock)]
        );
    }

    #[test]
    fn a_healthy_fleet_passes_every_check() {
        let report = judge(&limits(), &fleet(), &[]);
        assert_eq!(problems(&report), []);
        assert_eq!((report.verdict, report.exit_code), (Verdict::Healthy, 0));
        assert!(
            report
                .findings
                .iter()
                .all(|f| f.node.is_some() || f.check == Check::Quorum)
        );
    }

    #[test]
    fn without_persistence_the_quarantine_decides() {
        let mut nodes = fleet();
        nodes[1]
            .info
            .as_mut()
            .unwrap()
            .as_mut()
            .unwrap()
            .aof_enabled = false;
        nodes[2].appendfsync = Some(Ok("everysec".into()));

        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(report.verdict, Verdict::Healthy);
        let notes: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.level == Level::Note)
            .collect();
        assert_eq!(notes.len(), 2);
        assert_eq!(notes[0].scenario, Some(catalogue::RL05_NO_PERSISTENCE));
        assert_eq!(notes[1].scenario, Some(catalogue::RL05_EVERYSEC));
        assert!(
            notes[1].summary.contains("mitigated"),
            "{}",
            notes[1].summary
        );

        let off = Limits {
            quarantine: None,
            ..limits()
        };
        let report = judge(&off, &nodes, &[]);
        assert_eq!(
            problems(&report),
            [
                (Level::Error, Some("n2:1"), Check::Persistence),
                (Level::Error, Some("n3:1"), Check::Persistence),
            ]
        );
        assert_eq!(report.exit_code, 1);
        let everysec = &report
            .findings
            .iter()
            .find(|f| f.node.as_deref() == Some("n3:1") && f.check == Check::Persistence)
            .unwrap();
        assert_eq!(everysec.condition, Condition::Memory);
        assert_eq!(
            everysec.scenario.unwrap().file,
            "simulator/scenarios/rl-05-crash-everysec-before-fsync.toml"
        );

        // CONFIG GET refused: unknown, a warning when only appendfsync always would be safe.
        nodes[2].appendfsync = Some(Err(
            "NOPERM this user has no permissions to run the 'config|get' command".into(),
        ));
        let report = judge(&off, &nodes[2..], &[]);
        assert!(problems(&report).contains(&(Level::Warning, Some("n3:1"), Check::Persistence)));
    }

    #[test]
    fn replicas_evicting_nodes_and_duplicates_are_errors() {
        let mut nodes = fleet();
        nodes.push(healthy("n4:1", "d"));
        nodes.push(healthy("localhost:1", "a"));
        let limits = Limits {
            nodes: 5,
            quorum: 3,
            ..limits()
        };
        nodes[0].info.as_mut().unwrap().as_mut().unwrap().role = Role::Master { replicas: 1 };
        nodes[1].info.as_mut().unwrap().as_mut().unwrap().role = Role::Replica {
            master: "n1:1".into(),
        };
        nodes[2]
            .info
            .as_mut()
            .unwrap()
            .as_mut()
            .unwrap()
            .maxmemory_policy = Some("allkeys-lru".into());
        let report = judge(&limits, &nodes, &[]);
        assert_eq!(
            problems(&report),
            [
                (Level::Error, Some("n1:1"), Check::Role),
                (Level::Error, Some("n2:1"), Check::Role),
                (Level::Error, Some("n3:1"), Check::Eviction),
                (Level::Error, Some("localhost:1"), Check::SameServer),
            ]
        );
        let same = report
            .findings
            .iter()
            .find(|f| f.check == Check::SameServer)
            .unwrap();
        assert!(
            same.summary.contains("the same server as n1:1"),
            "{}",
            same.summary
        );
        assert_eq!(same.condition, Condition::Independence);
        let replica = report
            .findings
            .iter()
            .find(|f| f.node.as_deref() == Some("n2:1") && f.check == Check::Role)
            .unwrap();
        assert_eq!(replica.scenario, Some(catalogue::RL07_FAILOVER));

        // Three masters with distinct run_ids remain of five names: exactly a quorum.
        nodes[3].info.as_mut().unwrap().as_mut().unwrap().role = Role::Replica {
            master: "x:1".into(),
        };
        let report = judge(&limits, &nodes, &[]);
        assert!(problems(&report).contains(&(Level::Error, None, Check::Quorum)));
    }

    #[test]
    fn round_trips_are_judged_against_the_per_node_timeout() {
        let mut nodes = fleet();
        nodes[0].round_trips = vec![Duration::from_millis(40); 26];
        nodes[1].round_trips = vec![Duration::from_millis(80); 26];
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(
            problems(&report),
            [
                (Level::Warning, Some("n1:1"), Check::Latency),
                (Level::Error, Some("n2:1"), Check::Latency),
            ]
        );
        let trips = RoundTrips::of(&[
            Duration::from_millis(1),
            Duration::from_millis(3),
            Duration::from_millis(2),
        ])
        .unwrap();
        assert_eq!((trips.p50_ms, trips.p99_ms, trips.samples), (2.0, 3.0, 3));
    }

    #[test]
    fn clocks_are_judged_against_the_drift_factor() {
        let mut nodes = fleet();
        nodes[0].clock = Some(Ok(clock(0.02)));
        nodes[1].clock = Some(Ok(clock(0.007)));
        nodes[2].clock = Some(Err(
            "NOPERM this user has no permissions to run the 'time' command".into(),
        ));
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(
            problems(&report),
            [
                (Level::Error, Some("n1:1"), Check::ClockRate),
                (Level::Warning, Some("n2:1"), Check::ClockRate),
                (Level::Warning, Some("n3:1"), Check::ClockRate),
            ]
        );
        let fast = report
            .findings
            .iter()
            .find(|f| f.level == Level::Error)
            .unwrap();
        assert_eq!(fast.scenario, Some(catalogue::RL10_FAST));
        assert_eq!(fast.condition, Condition::Clocks);
        let refused = report
            .findings
            .iter()
            .find(|f| f.node.as_deref() == Some("n3:1") && f.check == Check::ClockRate)
            .unwrap();
        assert_eq!(
            refused.remedy.as_deref(),
            Some("grant the doctor's user +time")
        );

        // A step forward is an error of its own, and the rate is not judged across it.
        let mut stepped = clock(0.0);
        for sample in &mut stepped[15..] {
            sample.node_us += 300_000;
        }
        nodes[0].clock = Some(Ok(stepped));
        let report = judge(&limits(), &nodes[..1], &[]);
        assert_eq!(
            problems(&report)[0],
            (Level::Error, Some("n1:1"), Check::ClockSteps)
        );
        assert!(!problems(&report).iter().any(|p| p.2 == Check::ClockRate));
    }

    #[test]
    fn young_nodes_and_a_short_quarantine() {
        let mut nodes = fleet();
        for node in &mut nodes {
            node.info.as_mut().unwrap().as_mut().unwrap().uptime = Duration::from_secs(4);
        }
        nodes[0].info.as_mut().unwrap().as_mut().unwrap().uptime = Duration::from_secs(3600);
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(report.verdict, Verdict::Healthy);
        let wait = report
            .findings
            .iter()
            .find(|f| f.check == Check::Quorum)
            .unwrap();
        assert_eq!(wait.level, Level::Warning);
        // Up 4 s by their reports, so up at least 3 s: 7 s of a 10 s quarantine are left.
        assert!(wait.summary.contains("for another 7s"), "{}", wait.summary);

        let short = Limits {
            quarantine: Some(Duration::from_secs(5)),
            ..limits()
        };
        let report = judge(&short, &nodes, &[]);
        assert_eq!(
            problems(&report)[0],
            (Level::Error, None, Check::Configuration)
        );
        assert_eq!(
            report.findings[0].scenario,
            Some(catalogue::RL06B_SHORT_QUARANTINE)
        );
    }

    #[test]
    fn refusals_name_the_rule_to_add() {
        let mut nodes = fleet();
        nodes[0].probe = Some(Probe {
            operations: vec![
                (Operation::Acquire, Outcome::Done),
                (
                    Operation::Extend,
                    Outcome::Denied(
                        "NOPERM this user has no permissions to run the 'eval' command".into(),
                    ),
                ),
                (
                    Operation::Release,
                    Outcome::Denied(
                        "NOPERM this user has no permissions to run the 'eval' command".into(),
                    ),
                ),
            ],
            commands: Vec::new(),
            waiting: Vec::new(),
        });
        nodes[1].probe = Some(Probe {
            operations: vec![(
                Operation::Acquire,
                Outcome::Failed(
                    "server error: READONLY You can't write against a read only replica.".into(),
                ),
            )],
            commands: Vec::new(),
            waiting: Vec::new(),
        });
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(
            problems(&report),
            [
                (Level::Error, Some("n1:1"), Check::Permissions),
                (Level::Warning, Some("n2:1"), Check::Permissions),
            ]
        );
        let refusal = &report
            .findings
            .iter()
            .find(|f| f.level == Level::Error)
            .unwrap();
        assert_eq!(refusal.remedy.as_deref(), Some("ACL SETUSER <user> +eval"));
        assert_eq!(refusal.scenario, Some(catalogue::RL14_PLAIN_DEL));
        assert!(
            refusal.summary.starts_with("refuses extend, release:"),
            "{}",
            refusal.summary
        );
    }

    #[test]
    fn too_few_answers_leave_the_fleet_unchecked() {
        let mut nodes = fleet();
        nodes[0] = NodeObservation::unreachable("n1:1", "connection refused");
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!((report.verdict, report.exit_code), (Verdict::Failing, 1));
        nodes[1] = NodeObservation::unreachable("n2:1", "WRONGPASS invalid username-password pair");
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!((report.verdict, report.exit_code), (Verdict::Unchecked, 2));
        let wrongpass = report
            .findings
            .iter()
            .find(|f| f.node.as_deref() == Some("n2:1"))
            .unwrap();
        assert!(
            wrongpass
                .summary
                .starts_with("refuses this client's credentials"),
            "{}",
            wrongpass.summary
        );
    }

    #[test]
    fn the_report_serialises_with_condition_and_scenario() {
        let mut nodes = fleet();
        nodes[0].appendfsync = Some(Ok("everysec".into()));
        let report = judge(
            &Limits {
                quarantine: None,
                ..limits()
            },
            &nodes,
            &[],
        );
        let json: serde_json::Value = serde_json::to_value(&report).unwrap();
        assert_eq!(json["exit_code"], 1);
        assert_eq!(json["verdict"], "failing");
        let finding = json["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["level"] == "error")
            .unwrap();
        assert_eq!(finding["condition"]["id"], "memory");
        assert_eq!(finding["scenario"]["id"], "RL-05");
        assert_eq!(finding["check"], "persistence");
        assert_eq!(json["nodes"][0]["appendfsync"], "everysec");
        assert!(json["nodes"][0]["clock"]["rate"]["bound"].as_f64().unwrap() < 0.001);
    }
}
