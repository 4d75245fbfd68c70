//! The lock keys' lifetimes on each server, recorded for the diagrams: a span opens when a
//! server grants (or re-grants) the key to a token, moves its expiry on each extension, and
//! closes when the key is released, deleted, forgotten in a crash, expires, or the run ends
//! ([`History::keys`](crate::judge::history::History::keys)).
//!
//! The servers themselves keep only the current holder; the spans are the world's record of
//! what each server held, in true time, and change nothing in the run.

use std::collections::BTreeMap;

use redlock_core::{Reply, Token};

use super::World;
use crate::judge::history::{KeyEnd, KeySpan};
use crate::net::message::{NodeOp, NodeReply};
use crate::time::{MS, Nanos};

/// A lock key held on a server since `.0`, expiring at `.1` (server-clock milliseconds).
type OpenSpan = (Nanos, Option<u64>);

/// Open lock-key spans: (server, token) → (from, expiry in server-clock ms).
#[derive(Default)]
pub(super) struct OpenSpans(BTreeMap<(usize, Token), OpenSpan>);

impl OpenSpans {
    /// The tokens of `server`'s open spans, in token order (collected, so that the caller
    /// may close them while it walks the list).
    fn tokens_on(&self, server: usize) -> Vec<Token> {
        self.0
            .keys()
            .filter(|(s, _)| *s == server)
            .map(|(_, t)| *t)
            .collect()
    }
}

impl World<'_> {
    /// Keeps the lock-key lifetimes of each server for the diagrams.
    pub(super) fn track_spans(&mut self, server: usize, cmd: &NodeOp, reply: &NodeReply) {
        let NodeReply::Core(reply) = *reply else {
            return;
        };
        let now_ms = self.servers[server].now_ms(self.now);
        match (cmd, reply) {
            (
                NodeOp::SetNx { token, ttl_ms, .. }
                | NodeOp::SetNxReportHolder { token, ttl_ms, .. }
                | NodeOp::SetNxReadFence { token, ttl_ms, .. }
                | NodeOp::SetOrExtend { token, ttl_ms, .. },
                Reply::Acquired | Reply::AcquiredWithFence { .. } | Reply::Extended,
            ) => {
                let entry = self
                    .spans
                    .0
                    .entry((server, *token))
                    .or_insert((self.now, None));
                entry.1 = Some(now_ms + ttl_ms);
            }
            (NodeOp::ExtendIfOwner { token, ttl_ms, .. }, Reply::Extended) => {
                if let Some(entry) = self.spans.0.get_mut(&(server, *token)) {
                    entry.1 = Some(now_ms + ttl_ms);
                }
            }
            (
                NodeOp::ReleaseIfOwner { token, .. },
                Reply::Released | Reply::ReleasedOthersWaiting,
            ) => self.close_span(server, *token),
            (NodeOp::Del { .. }, Reply::Released) => {
                for token in self.spans.tokens_on(server) {
                    self.close_span(server, token);
                }
            }
            _ => {}
        }
    }

    fn close_span(&mut self, server: usize, token: Token) {
        if let Some((from, expire_ms)) = self.spans.0.remove(&(server, token)) {
            let expiry = self.expiry(server, from, expire_ms);
            let ended = if expiry <= self.now {
                KeyEnd::Expired
            } else {
                KeyEnd::Removed
            };
            self.history.keys.push(KeySpan {
                server,
                token,
                from,
                until: self.now.min(expiry),
                ended,
            });
        }
    }

    /// Closes the spans of keys a crash made the server forget.
    pub(super) fn close_lost_spans(&mut self, server: usize) {
        for token in self.spans.tokens_on(server) {
            if self.servers[server].holder(&self.scenario_key(), self.now) != Some(token) {
                self.close_span(server, token);
            }
        }
    }

    /// The true time at which a key set at `from` expires on `server`'s clock.
    fn expiry(&self, server: usize, from: Nanos, expire_ms: Option<u64>) -> Nanos {
        expire_ms.map_or(Nanos::MAX, |ms| {
            self.servers[server].clock.when((ms + 1) * MS, from)
        })
    }

    /// At the end of the run (`end`): closes every span still open, as expired or still
    /// held, and puts the spans in (server, start) order for the diagrams.
    pub(super) fn close_open_spans(&mut self, end: Nanos) {
        let open = std::mem::take(&mut self.spans.0);
        for ((server, token), (from, expire_ms)) in open {
            let expiry = self.expiry(server, from, expire_ms);
            let (until, ended) = if expiry <= end {
                (expiry, KeyEnd::Expired)
            } else {
                (end.max(from), KeyEnd::Held)
            };
            self.history.keys.push(KeySpan {
                server,
                token,
                from,
                until,
                ended,
            });
        }
        self.history.keys.sort_by_key(|k| (k.server, k.from));
    }
}
