//! Reading a scenario file: [`parse`] the TOML into its serde mirror (`raw.rs`), then
//! translate that into a checked [`Scenario`].
//!
//! The translation checks what no single field can: names that must resolve to a process,
//! a failover that needs a replica, the lock configuration the client would accept, and
//! expectations that name their cause. Each error points at the offending field
//! (`error.rs`). Each `Raw*` table has its translation here, beside the others, as
//! `RawNode::into_server` beside `RawClient::into_spec`.

use std::collections::BTreeMap;
use std::time::Duration;

use redlock_core::{DriftFactor, KeepAlive, LockConfig, RestartPolicy, RetryPolicy, Supervisor};
use toml::Spanned;

use super::error::Locator;
use super::raw::{
    Quarantine, RawClient, RawDelay, RawExpect, RawKeepAlive, RawLink, RawLock, RawNetwork,
    RawNode, RawNotifications, RawPartition, RawScenario,
};
use super::{
    Cause, ClientSpec, Crash, DEFAULT_UPTIME, Delay, Endpoint, Expectation, ExtendImpl, Failover,
    LinkSpec, NetworkSpec, NotificationSpec, Partition, PartitionKind, Persistence, Replication,
    Scenario, ScenarioError, ServerSpec, Spoof, Step, TokenSource, Verdict,
};
use crate::time::Nanos;
use crate::time::clock::ClockModel;

/// Parses and checks the text of a scenario file; `file` names it in errors.
///
/// # Errors
///
/// A [`ScenarioError::Invalid`] naming the line, column and field of the first problem.
pub fn parse(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
    let locator = Locator { file, text };
    let raw: RawScenario = locator.deserialize()?;
    raw.into_scenario(&locator)
}

impl RawScenario {
    /// Only the first error is reported, so the order of these checks is part of what a bad
    /// file prints: the lock, the client names, the nodes, the network, the notifications,
    /// the clients, the expectations.
    fn into_scenario(self, at: &Locator<'_>) -> Result<Scenario, ScenarioError> {
        let nodes = *self.lock.nodes.get_ref();
        if nodes == 0 || nodes > 64 {
            return Err(at.at(
                &self.lock.nodes,
                "lock.nodes",
                format!("{nodes} nodes; use 1 to 64"),
            ));
        }
        let base = self.lock.to_config(at)?;
        let client_names = client_names(&self.clients, at)?;
        let servers = servers(self.nodes, nodes, &client_names, at)?;
        let names = Names {
            nodes,
            servers: &servers,
            clients: &client_names,
        };
        let network = network(&self.network, &self.partitions, &self.delays, &names, at)?;
        let notifications = self.notifications.to_spec(at)?;

        let base = base.with_fencing(self.tokens == TokenSource::QuorumMinted);
        let quarantine = self.lock.restart_quarantine_ms;
        let clients = self
            .clients
            .into_iter()
            .enumerate()
            .map(|(i, raw)| raw.into_spec(i, &base, nodes, quarantine, at))
            .collect::<Result<Vec<_>, _>>()?;
        if clients.is_empty() {
            return Err(at.error(0, "client", "at least one [[client]] is required"));
        }
        let expect = self.expect.into_expectation(at)?;

        Ok(Scenario {
            name: self.name,
            description: self.description,
            source: at.file.to_owned(),
            seed: self.seed,
            duration: self.duration_ms.0,
            max_events: self.max_events.unwrap_or(20_000_000),
            tokens: self.tokens,
            expect,
            resource: self.lock.resource,
            nodes,
            network,
            notifications,
            servers,
            clients,
        })
    }
}

impl RawLock {
    /// The `[lock]` table as the configuration every client starts from.
    fn to_config(&self, at: &Locator<'_>) -> Result<LockConfig, ScenarioError> {
        let mut config = LockConfig::new(*self.nodes.get_ref()).with_retry(RetryPolicy::new(
            self.retries,
            self.retry_delay_ms
                .map_or(Duration::from_millis(50), |m| Duration::from_nanos(m.0)),
            self.retry_jitter_ms
                .map_or(Duration::from_millis(10), |m| Duration::from_nanos(m.0)),
        ));
        if let Some(ttl) = &self.ttl_ms {
            config = config.with_ttl(Duration::from_nanos(ttl.get_ref().0));
        }
        if let Some(factor) = &self.drift_factor {
            let drift = DriftFactor::from_f64(*factor.get_ref()).ok_or_else(|| {
                at.at(
                    factor,
                    "lock.drift_factor",
                    "must be a finite number in [0, 1)",
                )
            })?;
            config = config.with_drift_factor(drift);
        }
        if let Some(timeout) = &self.node_timeout_ms {
            config = config.with_node_timeout(Duration::from_nanos(timeout.get_ref().0));
        }
        if let Some(max_hold) = &self.max_hold_ms {
            config = config.with_max_hold(Duration::from_nanos(max_hold.get_ref().0));
        }
        // The simulator runs the configurations the client accepts: the same validation,
        // its error pointed at the key the file sets (at the first line when the file
        // leaves it to its default).
        config.validate().map_err(|e| {
            let span = match e.field() {
                "nodes" => Some(self.nodes.span()),
                "ttl" => self.ttl_ms.as_ref().map(Spanned::span),
                "node_timeout" => self.node_timeout_ms.as_ref().map(Spanned::span),
                "max_hold" => self.max_hold_ms.as_ref().map(Spanned::span),
                _ => None,
            };
            let key = file_key(e.field());
            at.error(
                span.map_or(0, |s| s.start),
                format!("lock.{key}"),
                e.reason(),
            )
        })?;
        Ok(config)
    }
}

/// The file's key for a lock setting the configuration's validation names.
fn file_key(field: &str) -> &str {
    match field {
        "ttl" => "ttl_ms",
        "node_timeout" => "node_timeout_ms",
        "max_hold" => "max_hold_ms",
        other => other,
    }
}

/// Each client's index by its name, once every name is checked: a client may not take a
/// name that `Names` gives a node or the resource, and no two clients share one.
fn client_names(
    clients: &[RawClient],
    at: &Locator<'_>,
) -> Result<BTreeMap<String, usize>, ScenarioError> {
    let client_names: BTreeMap<String, usize> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.get_ref().clone(), i))
        .collect();
    for (i, client) in clients.iter().enumerate() {
        let name = client.name.get_ref();
        if name.is_empty()
            || name.starts_with('n') && name[1..].chars().next().is_some_and(|c| c.is_ascii_digit())
            || name == "resource"
        {
            return Err(at.at(
                &client.name,
                format!("client[{i}].name"),
                format!("`{name}` is reserved or empty; name clients like `c1`"),
            ));
        }
        if client_names[name] != i {
            return Err(at.at(
                &client.name,
                format!("client[{i}].name"),
                format!("`{name}` is used by two clients"),
            ));
        }
    }
    Ok(client_names)
}

/// Every server: the primaries first, so that `nX` is server X, then the replicas in the
/// order of their `[[node]]` tables, so that one table resolves every name.
fn servers(
    raw: Vec<RawNode>,
    nodes: usize,
    clients: &BTreeMap<String, usize>,
    at: &Locator<'_>,
) -> Result<Vec<ServerSpec>, ScenarioError> {
    let mut servers: Vec<ServerSpec> = (0..nodes)
        .map(|i| unconfigured_server(format!("n{i}")))
        .collect();
    let mut seen_nodes = BTreeMap::new();
    for (k, node) in raw.into_iter().enumerate() {
        let field = format!("node[{k}]");
        let index = node.index(nodes, &field, at)?;
        if seen_nodes.insert(index, k).is_some() {
            return Err(at.at(
                &node.name,
                format!("{field}.name"),
                "this node is configured twice",
            ));
        }
        let replica_index = servers.len();
        let has_replica = node.replica.is_some();
        servers[index] = node.into_server(index, replica_index, &field, clients, at)?;
        if has_replica {
            servers.push(unconfigured_server(format!("n{index}.replica")));
        }
    }
    Ok(servers)
}

/// A server no `[[node]]` table configures (and every replica): ideal clock, no persistence.
fn unconfigured_server(name: String) -> ServerSpec {
    ServerSpec {
        name,
        clock: ClockModel::ideal(),
        persistence: Persistence::None,
        uptime: DEFAULT_UPTIME,
        crashes: Vec::new(),
        replica: None,
        failover: None,
    }
}

impl RawNode {
    /// The node's number, from its name `nX`.
    fn index(&self, nodes: usize, field: &str, at: &Locator<'_>) -> Result<usize, ScenarioError> {
        parse_node_name(self.name.get_ref(), nodes).ok_or_else(|| {
            at.at(
                &self.name,
                format!("{field}.name"),
                format!(
                    "`{}` is not a node; nodes are n0..n{}",
                    self.name.get_ref(),
                    nodes - 1
                ),
            )
        })
    }

    /// Node `index`'s server; its replica, if it has one, is server `replica_index`.
    fn into_server(
        self,
        index: usize,
        replica_index: usize,
        field: &str,
        clients: &BTreeMap<String, usize>,
        at: &Locator<'_>,
    ) -> Result<ServerSpec, ScenarioError> {
        let rate = self.clock.rate_ppm.as_ref().map_or(0, |r| *r.get_ref());
        if let Some(spanned) = &self.clock.rate_ppm {
            check_rate(rate).map_err(|m| at.at(spanned, format!("{field}.clock.rate_ppm"), m))?;
        }
        let steps = self
            .clock
            .steps
            .iter()
            .map(|s| (s.at_ms.0, s.by_ms.0))
            .collect();
        let failover = self.failover(field, clients, at)?;
        Ok(ServerSpec {
            name: format!("n{index}"),
            clock: ClockModel::new(self.clock.offset_ms.0, rate, steps),
            persistence: self.persistence,
            uptime: self.uptime_ms.map_or(DEFAULT_UPTIME, |m| m.0),
            crashes: self
                .crash
                .iter()
                .map(|c| Crash {
                    at: c.at_ms.0,
                    restart_after: c.restart_after_ms.map(|m| m.0),
                })
                .collect(),
            replica: self.replica.map(|replica| Replication {
                replica: replica_index,
                lag: replica.lag_ms.0,
                wait: replica.wait,
            }),
            failover,
        })
    }

    /// The failover to the node's replica, which it needs; the clients it moves must exist.
    fn failover(
        &self,
        field: &str,
        clients: &BTreeMap<String, usize>,
        at: &Locator<'_>,
    ) -> Result<Option<Failover>, ScenarioError> {
        let Some(failover) = &self.failover else {
            return Ok(None);
        };
        if self.replica.is_none() {
            return Err(at.at(
                failover,
                format!("{field}.failover"),
                "a failover needs a `replica`",
            ));
        }
        let raw = failover.get_ref();
        let moved = match &raw.clients {
            None => None,
            Some(names) => Some(
                names
                    .iter()
                    .enumerate()
                    .map(|(j, n)| {
                        clients.get(n.get_ref()).copied().ok_or_else(|| {
                            at.at(
                                n,
                                format!("{field}.failover.clients[{j}]"),
                                format!("no client named `{}`", n.get_ref()),
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        Ok(Some(Failover {
            at: raw.at_ms.0,
            promote_after: raw.promote_after_ms.0,
            crash_master: raw.crash_master,
            clients: moved,
        }))
    }
}

/// The network: the default link, the links that override it, then the partitions and the
/// delays, each of whose ends must name a process.
fn network(
    raw: &RawNetwork,
    partitions: &[RawPartition],
    delays: &[RawDelay],
    names: &Names<'_>,
    at: &Locator<'_>,
) -> Result<NetworkSpec, ScenarioError> {
    let mut network = NetworkSpec {
        default: raw.default.to_spec(&LinkSpec::default()),
        ..NetworkSpec::default()
    };
    for (k, link) in raw.links.iter().enumerate() {
        let field = format!("network.link[{k}]");
        let from = names.resolve(&link.from, at, &format!("{field}.from"))?;
        let to = names.resolve(&link.to, at, &format!("{field}.to"))?;
        network
            .links
            .push((from, to, link.link.to_spec(&network.default)));
    }
    for (k, partition) in partitions.iter().enumerate() {
        network
            .partitions
            .push(partition.to_partition(&format!("partition[{k}]"), names, at)?);
    }
    for (k, delay) in delays.iter().enumerate() {
        let field = format!("delay[{k}]");
        network.delays.push(Delay {
            from: names.resolve(&delay.from, at, &format!("{field}.from"))?,
            to: names.resolve(&delay.to, at, &format!("{field}.to"))?,
            start: delay.start_ms.0,
            end: delay.end_ms.map_or(Nanos::MAX, |m| m.0),
            extra: delay.extra_ms.0,
        });
    }
    Ok(network)
}

impl RawLink {
    /// `base`, with whatever this link sets instead.
    fn to_spec(&self, base: &LinkSpec) -> LinkSpec {
        let mut spec = base.clone();
        if let Some([min, max]) = self.latency_ms {
            spec.latency = (min.0.min(max.0), min.0.max(max.0));
        }
        if let Some(p) = self.loss {
            spec.loss = p.0;
        }
        if let Some(p) = self.duplicate {
            spec.duplicate = p.0;
        }
        if let Some(p) = self.spike_probability {
            spec.spike_probability = p.0;
        }
        if let Some(ms) = self.spike_ms {
            spec.spike = ms.0;
        }
        spec
    }
}

impl RawPartition {
    /// Either `groups` or `cut`, never both: they are two ways to say who cannot reach whom.
    fn to_partition(
        &self,
        field: &str,
        names: &Names<'_>,
        at: &Locator<'_>,
    ) -> Result<Partition, ScenarioError> {
        let kind = match (self.groups.is_empty(), self.cut.is_empty()) {
            (false, true) => PartitionKind::Groups(
                self.groups
                    .iter()
                    .enumerate()
                    .map(|(g, group)| {
                        group
                            .iter()
                            .enumerate()
                            .map(|(m, name)| {
                                names.resolve(name, at, &format!("{field}.groups[{g}][{m}]"))
                            })
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            (true, false) => PartitionKind::Cut(
                self.cut
                    .iter()
                    .enumerate()
                    .map(|(c, [from, to])| {
                        Ok((
                            names.resolve(from, at, &format!("{field}.cut[{c}][0]"))?,
                            names.resolve(to, at, &format!("{field}.cut[{c}][1]"))?,
                        ))
                    })
                    .collect::<Result<Vec<_>, ScenarioError>>()?,
            ),
            _ => return Err(at.error(0, field, "give either `groups` or `cut`")),
        };
        Ok(Partition {
            start: self.start_ms.0,
            end: self.end_ms.map_or(Nanos::MAX, |m| m.0),
            kind,
        })
    }
}

impl RawNotifications {
    /// The notifications' faults; each spoofer's period is above zero and its span not empty.
    fn to_spec(&self, at: &Locator<'_>) -> Result<NotificationSpec, ScenarioError> {
        let mut spoofs = Vec::with_capacity(self.spoof.len());
        for (k, spoof) in self.spoof.iter().enumerate() {
            let field = format!("notifications.spoof[{k}]");
            let span = spoof.span();
            let spoof = spoof.get_ref();
            if spoof.every_ms.0 == 0 {
                return Err(at.error(span.start, format!("{field}.every_ms"), "must be above 0"));
            }
            if spoof.end_ms.0 <= spoof.start_ms.0 {
                return Err(at.error(
                    span.start,
                    format!("{field}.end_ms"),
                    "must be after start_ms",
                ));
            }
            spoofs.push(Spoof {
                start: spoof.start_ms.0,
                end: spoof.end_ms.0,
                every: spoof.every_ms.0,
                payload: spoof.payload,
            });
        }
        Ok(NotificationSpec {
            loss: self.loss.map_or(0.0, |p| p.0),
            duplicate: self.duplicate.map_or(0.0, |p| p.0),
            extra_delay: self.extra_delay_ms.0,
            spoofs,
        })
    }
}

impl RawExpect {
    /// The expectation, which must make sense: mutual exclusion is never "prevented by
    /// fencing", and anything but SAFE everywhere names a cause that can explain it.
    fn into_expectation(self, at: &Locator<'_>) -> Result<Expectation, ScenarioError> {
        let expect = Expectation {
            exclusion: *self.exclusion.get_ref(),
            plain: self.plain,
            fenced: self.fenced,
            strict: self.strict,
            cause: self.cause.as_ref().map(|c| *c.get_ref()),
            fences_increase: self.fences_increase,
        };
        if expect.exclusion == Verdict::PreventedByFencing {
            return Err(at.at(
                &self.exclusion,
                "expect.exclusion",
                "mutual exclusion is SAFE or VIOLATED: fencing protects the resource, not the lock",
            ));
        }
        let all_safe = [expect.exclusion, expect.plain, expect.fenced, expect.strict]
            .iter()
            .all(|v| *v == Verdict::Safe);
        match (&self.cause, all_safe) {
            (None, false) => {
                return Err(at.error(
                    0,
                    "expect.cause",
                    "a scenario that expects anything but SAFE must name the cause (A, B or C)",
                ));
            }
            (Some(cause), true) => {
                return Err(at.at(
                    cause,
                    "expect.cause",
                    "a scenario that expects SAFE everywhere has no cause",
                ));
            }
            (Some(cause), false)
                if expect.exclusion == Verdict::Violated && *cause.get_ref() == Cause::B =>
            {
                return Err(at.at(
                    cause,
                    "expect.cause",
                    "an overlap of windows is never cause B (a pause or a delay does not lengthen what a holder believes): A or C",
                ));
            }
            _ => {}
        }
        Ok(expect)
    }
}

impl RawClient {
    /// Client `i`, on `nodes` nodes unless it names its own; `base` and `quarantine` are the
    /// file's `[lock]`, which the client's own fields override.
    fn into_spec(
        self,
        i: usize,
        base: &LockConfig,
        nodes: usize,
        quarantine: Option<Quarantine>,
        at: &Locator<'_>,
    ) -> Result<ClientSpec, ScenarioError> {
        let field = format!("client[{i}]");
        let rate = self.clock.rate_ppm.as_ref().map_or(0, |r| *r.get_ref());
        if let Some(spanned) = &self.clock.rate_ppm {
            check_rate(rate).map_err(|m| at.at(spanned, format!("{field}.clock.rate_ppm"), m))?;
        }
        let steps = self
            .clock
            .steps
            .iter()
            .map(|s| (s.get_ref().at_ms.0, s.get_ref().by_ms.0))
            .collect();
        let subset = self.node_subset(&field, nodes, at)?;
        let config = self.lock_config(&field, base, subset.len(), at)?;
        let restart = match self.restart_quarantine_ms.or(quarantine) {
            None => RestartPolicy::default_for(config.ttl()),
            Some(Quarantine(Some(ms))) => RestartPolicy::Quarantine(Duration::from_nanos(ms)),
            Some(Quarantine(None)) => RestartPolicy::Persistent,
        };
        let (keep_alive, supervisor) = self.lease_keeping(&field, &config, at)?;
        Ok(ClientSpec {
            name: self.name.into_inner(),
            start: self.start_ms.0,
            iterations: self.iterations,
            gap: self.gap_ms.0,
            steps: self.steps,
            access_timeout: self
                .access_timeout_ms
                .map_or(1_000 * crate::time::MS, |m| m.0),
            pauses: self
                .pauses
                .iter()
                .map(|p| (p.at_ms.0, p.for_ms.0))
                .collect(),
            crash_at: self.crash_at_ms.map(|m| m.0),
            clock: ClockModel::new(self.clock.offset_ms.0, rate, steps),
            clock_kind: self.clock.kind,
            freeze_during_pauses: self.clock.freeze_during_pauses,
            release: self.release,
            extend: self.extend,
            loss_order: self.loss_order,
            timing: self.timing,
            nodes: subset,
            config,
            restart,
            keep_alive,
            supervisor,
        })
    }

    /// The nodes the client uses: all of them, or its `nodes` list of distinct indices.
    fn node_subset(
        &self,
        field: &str,
        nodes: usize,
        at: &Locator<'_>,
    ) -> Result<Vec<usize>, ScenarioError> {
        let Some(list) = &self.nodes else {
            return Ok((0..nodes).collect());
        };
        let subset = list.get_ref().clone();
        let mut sorted = subset.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if subset.is_empty() || sorted.len() != subset.len() || subset.iter().any(|&n| n >= nodes) {
            return Err(at.at(
                list,
                format!("{field}.nodes"),
                format!("must list distinct node indices below {nodes}"),
            ));
        }
        Ok(subset)
    }

    /// The file's lock configuration for the client's `nodes`, with the client's own
    /// overrides, checked as the client's builder checks it.
    fn lock_config(
        &self,
        field: &str,
        base: &LockConfig,
        nodes: usize,
        at: &Locator<'_>,
    ) -> Result<LockConfig, ScenarioError> {
        let retry = RetryPolicy::new(
            self.retries.unwrap_or(base.retry().retries()),
            self.retry_delay_ms
                .map_or(base.retry().delay(), |m| Duration::from_nanos(m.0)),
            self.retry_jitter_ms
                .map_or(base.retry().jitter(), |m| Duration::from_nanos(m.0)),
        );
        let mut config = base.clone().with_nodes(nodes).with_retry(retry);
        if let Some(ttl) = self.ttl_ms {
            config = config.with_ttl(Duration::from_nanos(ttl.0));
        }
        if let Some(timeout) = self.node_timeout_ms {
            config = config.with_node_timeout(Duration::from_nanos(timeout.0));
        }
        config.validate().map_err(|e| {
            let key = file_key(e.field());
            at.at(&self.name, format!("{field}.{key}"), e.reason())
        })?;
        Ok(config)
    }

    /// The keep-alive policy and the supervisor's grace period, checked against the rest of
    /// the client: a kept-alive lease is extended by the keep-alive alone, with the script.
    fn lease_keeping(
        &self,
        field: &str,
        config: &LockConfig,
        at: &Locator<'_>,
    ) -> Result<(Option<KeepAlive>, Option<Duration>), ScenarioError> {
        let mut keep_alive = self.keep_alive.as_ref().map(|raw| raw.get_ref().policy());
        let supervisor = self.supervisor_grace(field, config, at)?;
        if supervisor.is_some() {
            // As `redlock run`: extend at half-life.
            keep_alive.get_or_insert_with(|| KeepAlive::at_half_life(config.ttl()));
        }
        if keep_alive.is_some() {
            let spanned = self
                .keep_alive
                .as_ref()
                .map(|k| k.span())
                .or_else(|| self.supervisor.as_ref().map(|s| s.span()))
                .unwrap_or_default();
            let refuse =
                |why: &str| at.error(spanned.start, format!("{field}.keep_alive"), why.to_owned());
            if self.steps.contains(&Step::Extend) {
                return Err(refuse(
                    "a kept-alive lease is extended by the keep-alive; remove the `extend` steps",
                ));
            }
            if self.extend != ExtendImpl::Script {
                return Err(refuse(
                    "the keep-alive extends with the script; it cannot be combined with `extend = \"reacquire\"`",
                ));
            }
        }
        let drops_handle = self
            .steps
            .iter()
            .any(|step| matches!(step, Step::DropHandle(_)));
        if drops_handle && (keep_alive.is_none() || supervisor.is_some()) {
            return Err(at.error(
                0,
                format!("{field}.steps"),
                "`drop-handle` drops the handle of a kept-alive lease: it needs `keep_alive` and no `supervisor`".to_owned(),
            ));
        }
        Ok((keep_alive, supervisor))
    }

    /// How long a supervised command has to stop before it is killed: at most a quarter of
    /// the TTL, and by default that or 10 s, whichever is shorter (as `redlock run`).
    fn supervisor_grace(
        &self,
        field: &str,
        config: &LockConfig,
        at: &Locator<'_>,
    ) -> Result<Option<Duration>, ScenarioError> {
        let Some(raw) = &self.supervisor else {
            return Ok(None);
        };
        // `redlock run`'s rules, from the core.
        let quarter = Supervisor::longest_grace(config.ttl());
        let grace = raw.get_ref().kill_after_ms.map_or_else(
            || Supervisor::default_grace(config.ttl()),
            |m| Duration::from_nanos(m.0),
        );
        if grace > quarter {
            return Err(at.at(
                raw,
                format!("{field}.supervisor.kill_after_ms"),
                "more than a quarter of the ttl (as `redlock run` refuses it)",
            ));
        }
        if self.clock.freeze_during_pauses {
            return Err(at.at(
                raw,
                format!("{field}.supervisor"),
                "a supervised client's pauses stop the supervisor alone, not the host's clock; drop `freeze_during_pauses`",
            ));
        }
        Ok(Some(grace))
    }
}

impl RawKeepAlive {
    /// The core's default keep-alive, with whatever the table sets instead.
    fn policy(&self) -> KeepAlive {
        let mut policy = KeepAlive::default();
        if let Some(before) = self.extend_before_ms {
            policy = policy.extend_before(Duration::from_nanos(before.0));
        }
        if let Some(margin) = self.margin_ms {
            policy = policy.loss_margin(Duration::from_nanos(margin.0));
        }
        policy
    }
}

fn check_rate(ppm: i64) -> Result<(), String> {
    if (-500_000..=1_000_000).contains(&ppm) {
        Ok(())
    } else {
        Err(format!(
            "{ppm} ppm; a clock rate error must lie in [-500000, 1000000] ppm"
        ))
    }
}

fn parse_node_name(name: &str, nodes: usize) -> Option<usize> {
    let index: usize = name.strip_prefix('n')?.parse().ok()?;
    (index < nodes && name == format!("n{index}")).then_some(index)
}

/// Resolves process names: `c1` (clients), `n0` (nodes), `n0.replica`, `resource`.
struct Names<'a> {
    nodes: usize,
    servers: &'a [ServerSpec],
    clients: &'a BTreeMap<String, usize>,
}

impl Names<'_> {
    fn resolve(
        &self,
        name: &Spanned<String>,
        at: &Locator<'_>,
        field: &str,
    ) -> Result<Endpoint, ScenarioError> {
        let text = name.get_ref();
        if text == "resource" {
            return Ok(Endpoint::Resource);
        }
        if let Some(&client) = self.clients.get(text) {
            return Ok(Endpoint::Client(client));
        }
        if let Some(index) = self.servers.iter().position(|s| s.name == *text) {
            return Ok(Endpoint::Server(index));
        }
        Err(at.at(
            name,
            field,
            format!(
                "`{text}` names no process; use a client name, `resource`, n0..n{} or `nX.replica`",
                self.nodes - 1
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "minimal"
[expect]
exclusion = "SAFE"
plain = "SAFE"
fenced = "SAFE"
strict = "SAFE"
[[client]]
name = "c1"
steps = ["write"]
"#;

    #[test]
    fn minimal_file_gets_the_defaults() {
        let scenario = parse(MINIMAL, "minimal.toml").unwrap();
        assert_eq!(scenario.nodes, 5);
        assert_eq!(scenario.servers.len(), 5);
        assert_eq!(scenario.clients[0].nodes, vec![0, 1, 2, 3, 4]);
        assert_eq!(scenario.clients[0].steps, vec![Step::Write]);
    }

    fn error(text: &str) -> ScenarioError {
        parse(text, "bad.toml").unwrap_err()
    }

    #[test]
    fn errors_name_line_and_field() {
        let e = error(&MINIMAL.replace("steps = [\"write\"]", "steps = [\"write\", \"slep 5\"]"));
        assert_eq!(e.line(), Some(10), "{e}");
        assert_eq!(e.field(), Some("client[0].steps[1]"), "{e}");
        assert!(e.to_string().contains("unknown step `slep`"), "{e}");

        let e = error(&MINIMAL.replace("name = \"c1\"", "name = \"c1\"\nstart = 5"));
        assert_eq!(e.line(), Some(10), "{e}");
        assert!(e.to_string().contains("unknown field `start`"), "{e}");

        let e = error(&format!(
            "{MINIMAL}\n[[partition]]\ngroups = [[\"c1\", \"n9\"]]\n"
        ));
        assert_eq!(e.field(), Some("partition[0].groups[0][1]"), "{e}");
        assert_eq!(e.line(), Some(13), "{e}");

        let e = error(&MINIMAL.replace("plain = \"SAFE\"", "plain = \"VIOLATED\""));
        assert_eq!(e.field(), Some("expect.cause"), "{e}");

        let e = error(&format!(
            "{MINIMAL}\n[lock]\nttl_ms = 100\nnode_timeout_ms = 50\n"
        ));
        assert_eq!(e.field(), Some("lock.node_timeout_ms"), "{e}");
        // The key the file sets, not the TTL's line.
        assert_eq!(e.line(), Some(14), "{e}");
        let e = error(&format!("{MINIMAL}\n[lock]\nnodes = 0\n"));
        assert_eq!((e.field(), e.line()), (Some("lock.nodes"), Some(13)), "{e}");

        let e = error("name = \"x\"\n[expect\n");
        assert_eq!(e.line(), Some(2), "{e}");
    }

    #[test]
    fn the_mutual_exclusion_expectation_is_required_and_checked() {
        let e = error(&MINIMAL.replace("exclusion = \"SAFE\"\n", ""));
        assert!(e.to_string().contains("missing field `exclusion`"), "{e}");

        let e = error(&MINIMAL.replace(
            "exclusion = \"SAFE\"",
            "exclusion = \"PREVENTED_BY_FENCING\"",
        ));
        assert_eq!(e.field(), Some("expect.exclusion"), "{e}");
        assert_eq!(e.line(), Some(4), "{e}");

        // An overlap alone, with the resource untouched, still needs its cause...
        let e = error(&MINIMAL.replace("exclusion = \"SAFE\"", "exclusion = \"VIOLATED\""));
        assert_eq!(e.field(), Some("expect.cause"), "{e}");
        // ...which is never B.
        let e = error(&MINIMAL.replace(
            "exclusion = \"SAFE\"",
            "exclusion = \"VIOLATED\"\ncause = \"B\"",
        ));
        assert_eq!(e.field(), Some("expect.cause"), "{e}");
        assert!(e.to_string().contains("never cause B"), "{e}");
        let ok = MINIMAL.replace(
            "exclusion = \"SAFE\"",
            "exclusion = \"VIOLATED\"\ncause = \"A\"",
        );
        assert_eq!(
            parse(&ok, "ok.toml").unwrap().expect.exclusion,
            Verdict::Violated
        );
    }

    #[test]
    fn a_bad_value_in_a_located_field_names_the_field_alone() {
        // `ttl_ms` is kept with its place in the file; the name of the wrapper that holds
        // the place is serde's business and must not reach the message.
        let e = error(&format!("{MINIMAL}\n[lock]\nttl_ms = -5000\n"));
        assert_eq!(e.field(), Some("lock.ttl_ms"), "{e}");
        assert!(!e.to_string().contains("serde"), "{e}");
        assert_eq!(e.line(), Some(13), "{e}");
    }

    #[test]
    fn bad_rates_are_refused() {
        let text = MINIMAL.replace(
            "steps = [\"write\"]",
            "steps = [\"write\"]\nclock = { rate_ppm = -2000000 }",
        );
        let e = error(&text);
        assert_eq!(e.field(), Some("client[0].clock.rate_ppm"), "{e}");
        assert_eq!(e.line(), Some(11), "{e}");
    }
}
