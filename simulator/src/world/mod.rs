//! The world: true time, one event queue ordered by (time, sequence number), one seeded
//! ChaCha generator for everything random, and the dispatch of every event. This file is
//! the switchboard (the queue, the dispatch, the clients' plumbing, the routing of
//! messages); the rest lives beside it, as more `impl World` blocks:
//!
//! | file | job |
//! |---|---|
//! | `script.rs` | the scenario's script as events, and the notes that narrate its faults |
//! | `servers.rs` | requests served and answered; crashes, restarts, fsyncs, replication, failovers |
//! | `notify.rs` | release notifications: published by the release script, or spoofed |
//! | `spans.rs` | the lock keys' lifetimes on each server, for the diagrams |
//! | `windows.rs` | each lease's windows, computed when the run ends |

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt::Write;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::client::{Client, Ctx, Outgoing, Timer};
use crate::judge::history::History;
use crate::judge::recording::{CLOCK_SAMPLES, MessageRecord, Recording};
use crate::net::Network;
use crate::net::message::Msg;
use crate::node::server::{Effect, Server};
use crate::scenario::{Endpoint, Scenario};
use crate::time::{Nanos, fmt_duration, fmt_ms};

mod notify;
mod script;
mod servers;
mod spans;
mod windows;

use spans::OpenSpans;

/// Why a run could not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The run processed more events than the scenario allows.
    #[error(
        "step limit of {limit} events reached at t={at}ms; raise `max_events` or shorten the scenario"
    )]
    StepLimit {
        /// The limit.
        limit: u64,
        /// True time when it was hit (ms).
        at: String,
    },
}

#[derive(Debug)]
enum Event {
    ClientStart(usize),
    ClientWake {
        client: usize,
        timer: Timer,
        generation: u64,
    },
    ClientPause {
        client: usize,
        until: Nanos,
    },
    ClientResume(usize),
    ClientCrash(usize),
    Deliver {
        from: Endpoint,
        to: Endpoint,
        msg: Msg,
    },
    ServerCrash {
        server: usize,
        restart_after: Option<Nanos>,
    },
    ServerRestart(usize),
    ServerFsync(usize),
    Replicate {
        master: usize,
        replica: usize,
        effect: Effect,
        ack: Option<(usize, Msg)>,
    },
    FailoverStop(usize),
    FailoverPromote(usize),
    /// Someone publishes on every node's channel of the lock key (`[[notifications.spoof]]`).
    Spoof(usize),
    Note {
        who: String,
        what: String,
    },
}

struct Scheduled {
    time: Nanos,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed, so that the max-heap pops the earliest (time, seq) first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// The result of a run: the history for the judge, and the trace when asked for.
pub(crate) struct Outcome {
    /// What happened.
    pub(crate) history: History,
    /// Every event, one line each, when tracing was on.
    pub(crate) trace: Option<String>,
    /// Messages and clock readings, when tracing was on.
    pub(crate) recording: Option<Recording>,
    /// Events processed.
    pub(crate) events: u64,
    /// True time at the end.
    pub(crate) ended_at: Nanos,
}

pub(crate) struct World<'s> {
    scenario: &'s Scenario,
    now: Nanos,
    seq: u64,
    queue: BinaryHeap<Scheduled>,
    rng: ChaCha8Rng,
    network: Network,
    servers: Vec<Server>,
    clients: Vec<Client>,
    /// Events that reached a paused client, replayed in order when it resumes.
    deferred: Vec<Vec<Scheduled>>,
    /// `routes[client][address]`: the server a client reaches at a node address.
    routes: Vec<Vec<usize>>,
    history: History,
    trace: Option<String>,
    recording: Option<Recording>,
    events: u64,
    epochs: u64,
    /// Open lock-key spans, for the diagrams.
    spans: OpenSpans,
    out: Vec<Outgoing>,
}

impl<'s> World<'s> {
    pub(crate) fn new(scenario: &'s Scenario, seed: u64, trace: bool) -> Self {
        let clients: Vec<Client> = scenario
            .clients
            .iter()
            .enumerate()
            .map(|(i, spec)| Client::new(i, spec.clone(), &scenario.resource))
            .collect();
        let routes = vec![(0..scenario.nodes).collect(); clients.len()];
        let mut world = Self {
            scenario,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            network: Network::new(scenario.network.clone()),
            servers: scenario
                .servers
                .iter()
                .enumerate()
                .map(|(i, spec)| Server::new(i, spec))
                .collect(),
            deferred: clients.iter().map(|_| Vec::new()).collect(),
            clients,
            routes,
            history: History::new(scenario.clients.len()),
            trace: trace.then(String::new),
            recording: trace.then(Recording::default),
            events: 0,
            epochs: 0,
            spans: OpenSpans::default(),
            out: Vec::new(),
        };
        world.schedule_script();
        world
    }

    fn at(&mut self, time: Nanos, event: Event) {
        self.seq += 1;
        self.queue.push(Scheduled {
            time,
            seq: self.seq,
            event,
        });
    }

    fn log(&mut self, who: &str, what: std::fmt::Arguments<'_>) {
        if let Some(trace) = &mut self.trace {
            let _ = writeln!(trace, "{:>16} {who:<10} {what}", fmt_ms(self.now));
        }
    }

    fn note(&mut self, who: &str, what: String) {
        self.log(who, format_args!("** {what}"));
        self.history.note(self.now, who, what);
    }

    pub(crate) fn run(mut self) -> Result<Outcome, SimError> {
        let limit = self.scenario.max_events;
        while let Some(next) = self.queue.pop() {
            if next.time > self.scenario.duration {
                break;
            }
            self.events += 1;
            if self.events > limit {
                return Err(SimError::StepLimit {
                    limit,
                    at: fmt_ms(next.time),
                });
            }
            self.now = next.time;
            self.dispatch(next);
        }
        Ok(self.finish())
    }

    /// The client an event is for, and which of its sides (events for a paused client
    /// wait; a supervised command's own events do not).
    fn client_of(event: &Event) -> Option<(usize, Timer)> {
        match event {
            Event::ClientStart(c) => Some((*c, Timer::Lock)),
            Event::ClientWake { client, timer, .. } => Some((*client, *timer)),
            Event::Deliver {
                to: Endpoint::Client(c),
                msg,
                ..
            } => Some(match msg {
                Msg::AccessAck { .. } => (*c, Timer::Work),
                _ => (*c, Timer::Lock),
            }),
            _ => None,
        }
    }

    fn dispatch(&mut self, scheduled: Scheduled) {
        if let Some((c, side)) = Self::client_of(&scheduled.event)
            && self.clients[c].paused_until.is_some()
            && self.clients[c].pauses(side)
        {
            self.deferred[c].push(scheduled);
            return;
        }
        match scheduled.event {
            Event::ClientStart(c) => self.with_client(c, |client, ctx| client.on_start(ctx)),
            Event::ClientWake {
                client,
                timer,
                generation,
            } => {
                self.with_client(client, |c, ctx| c.on_wake(ctx, timer, generation));
            }
            Event::ClientPause { client, until } => self.pause(client, until),
            Event::ClientResume(c) => self.resume(c),
            Event::ClientCrash(c) => {
                let name = self.scenario.clients[c].name.clone();
                self.note(&name, "crashes".into());
                self.with_client(c, |client, ctx| client.crash(ctx));
            }
            Event::Deliver { from, to, msg } => self.deliver(from, to, msg),
            Event::Spoof(k) => self.spoof(k),
            Event::ServerCrash {
                server,
                restart_after,
            } => self.crash_server(server, restart_after),
            Event::ServerRestart(server) => self.restart_server(server),
            Event::ServerFsync(server) => self.fsync(server),
            Event::Replicate {
                master,
                replica,
                effect,
                ack,
            } => self.replicate(master, replica, effect, ack),
            Event::FailoverStop(server) => self.failover_stop(server),
            Event::FailoverPromote(server) => self.failover_promote(server),
            Event::Note { who, what } => self.note(&who, what),
        }
    }

    fn pause(&mut self, client: usize, until: Nanos) {
        let c = &mut self.clients[client];
        if c.crashed {
            return;
        }
        let until = c.paused_until.map_or(until, |u| u.max(until));
        c.paused_until = Some(until);
        if c.spec.freeze_during_pauses {
            c.clock.freeze(self.now, until);
        }
        self.history.pauses.push((client, self.now, until));
        let name = c.spec.name.clone();
        let frozen = if c.spec.freeze_during_pauses {
            " (its clock stops too)"
        } else {
            ""
        };
        self.note(
            &name,
            format!("pauses for {}{frozen}", fmt_duration(until - self.now)),
        );
        self.at(until, Event::ClientResume(client));
    }

    fn resume(&mut self, client: usize) {
        let Some(until) = self.clients[client].paused_until else {
            return;
        };
        if self.now < until {
            return; // an earlier resume of a pause that was extended
        }
        self.clients[client].paused_until = None;
        let name = self.clients[client].spec.name.clone();
        self.note(&name, "resumes".into());
        self.with_client(client, |c, ctx| c.on_resume(ctx));
        // Replay what arrived meanwhile, in the order it arrived.
        let deferred = std::mem::take(&mut self.deferred[client]);
        for scheduled in deferred {
            self.dispatch(scheduled);
        }
    }

    fn with_client(&mut self, client: usize, f: impl FnOnce(&mut Client, &mut Ctx<'_>)) {
        let mut out = std::mem::take(&mut self.out);
        {
            let mut ctx = Ctx {
                now: self.now,
                rng: &mut self.rng,
                out: &mut out,
                history: &mut self.history,
                epochs: &mut self.epochs,
                tokens: self.scenario.tokens,
                trace: &mut self.trace,
            };
            f(&mut self.clients[client], &mut ctx);
        }
        for outgoing in out.drain(..) {
            match outgoing {
                Outgoing::Node { address, msg } => {
                    let server = self.routes[client][address];
                    self.send(Endpoint::Client(client), Endpoint::Server(server), msg);
                }
                Outgoing::Resource { msg } => {
                    self.send(Endpoint::Client(client), Endpoint::Resource, msg)
                }
                Outgoing::Wake {
                    at,
                    timer,
                    generation,
                } => {
                    let wake = Event::ClientWake {
                        client,
                        timer,
                        generation,
                    };
                    self.at(at.max(self.now), wake);
                }
                Outgoing::Pause { until } => self.pause(client, until),
            }
        }
        self.out = out;
    }

    fn send(&mut self, from: Endpoint, to: Endpoint, msg: Msg) {
        let deliveries = self.network.send(self.now, from, to, &mut self.rng);
        if let Some(recording) = &mut self.recording {
            recording.messages.push(MessageRecord {
                from: self.scenario.endpoint_name(from),
                to: self.scenario.endpoint_name(to),
                sent_at: self.now,
                arrives_at: deliveries.first().copied(),
                label: msg.label(),
            });
        }
        if self.trace.is_some() {
            let (f, t) = (
                self.scenario.endpoint_name(from),
                self.scenario.endpoint_name(to),
            );
            match deliveries.as_slice() {
                [] => self.log(&f, format_args!("-> {t} LOST {msg:?}")),
                [first, ..] => {
                    let at = fmt_ms(*first);
                    self.log(&f, format_args!("-> {t} (arrives {at}) {msg:?}"));
                }
            }
        }
        for at in deliveries {
            self.at(
                at,
                Event::Deliver {
                    from,
                    to,
                    msg: msg.clone(),
                },
            );
        }
    }

    /// A message arrives: routed to the server, client or resource it was sent to; anything
    /// else (a reply to the resource, say) is logged and dropped.
    fn deliver(&mut self, from: Endpoint, to: Endpoint, msg: Msg) {
        match (to, msg) {
            (
                Endpoint::Server(s),
                Msg::Request {
                    client,
                    op,
                    tag,
                    conn,
                    cmd,
                },
            ) => {
                let Some((reply, effect)) = self.serve(s, conn.bound, &cmd) else {
                    return;
                };
                let server = self.servers[s].id();
                let reply_msg = Msg::Reply {
                    op,
                    tag,
                    conn: conn.id,
                    server,
                    reply,
                };
                self.answer(s, from, client, effect, reply_msg);
            }
            (
                Endpoint::Client(c),
                Msg::Reply {
                    op,
                    tag,
                    conn,
                    server,
                    reply,
                },
            ) => {
                self.with_client(c, |client, ctx| {
                    client.on_reply(ctx, op, tag, conn, server, reply);
                });
            }
            (Endpoint::Resource, Msg::Access { access }) => {
                if let Some(record) = self.history.accesses.get_mut(access) {
                    record.arrived_at = Some(self.now);
                }
                self.log("resource", format_args!("applies access #{access}"));
                self.send(Endpoint::Resource, from, Msg::AccessAck { access });
            }
            (
                Endpoint::Client(c),
                Msg::Notify {
                    node,
                    channel,
                    payload,
                },
            ) => {
                self.with_client(c, |client, ctx| {
                    client.on_notify(ctx, node, &channel, &payload);
                });
            }
            (Endpoint::Client(c), Msg::AccessAck { access }) => {
                self.with_client(c, |client, ctx| client.on_access_ack(ctx, access));
            }
            (to, msg) => {
                let name = self.scenario.endpoint_name(to);
                self.log(&name, format_args!("ignores {msg:?}"));
            }
        }
    }

    /// The lock key of the scenario's resource, as the client names it on the nodes.
    fn scenario_key(&self) -> String {
        format!("redlock:{}", self.scenario.resource)
    }

    /// The end of the run: the open key spans closed and each lease's windows computed.
    fn finish(mut self) -> Outcome {
        let end = self.now;
        self.close_open_spans(end);
        self.close_windows();
        if let Some(recording) = &mut self.recording {
            recording.clocks = self
                .clients
                .iter()
                .map(|client| clock_readings(&client.clock, end))
                .collect();
        }
        Outcome {
            history: self.history,
            trace: self.trace,
            recording: self.recording,
            events: self.events,
            ended_at: end,
        }
    }
}

/// A clock's readings from 0 to `end`: evenly spaced, and just before and at each step.
fn clock_readings(clock: &crate::time::clock::ClockModel, end: Nanos) -> Vec<(Nanos, u64)> {
    let mut at: Vec<Nanos> = (0..=CLOCK_SAMPLES)
        .map(|i| (u128::from(end) * u128::from(i) / u128::from(CLOCK_SAMPLES)) as Nanos)
        .collect();
    for &(step, _) in clock.steps() {
        if step <= end {
            at.extend([step.saturating_sub(1), step]);
        }
    }
    at.sort_unstable();
    at.dedup();
    at.into_iter().map(|t| (t, clock.read(t))).collect()
}
