//! Release notifications: what a server publishes on the lock key's channel (the released
//! token, from the release script) and what a spoofer publishes there
//! (`[[notifications.spoof]]`), delivered to the subscribed clients over the network with
//! the notifications' own faults.
//!
//! A notification is a hint: it can only bring a waiting client's next round sooner (the
//! core's `Waiting` decides), so these messages may be lost, duplicated, late or forged
//! without the lock's safety depending on them.

use std::sync::Arc;

use crate::net::name::Name;

use rand::RngExt;

use super::{Event, World};
use crate::net::message::Msg;
use crate::scenario::{Endpoint, SpoofPayload};

impl World<'_> {
    /// Server `s` publishes `payload` on the channel `key`: every client subscribed to it (a
    /// client whose node address leads to `s`) gets it over the network, with the
    /// notifications' own faults (lost, duplicated, later than the replies).
    pub(super) fn publish(&mut self, s: usize, key: &Name, payload: Arc<[u8]>) {
        let faults = &self.scenario.notifications;
        let (loss, duplicate, extra) = (faults.loss, faults.duplicate, faults.extra_delay);
        for c in 0..self.clients.len() {
            let subscribed: Vec<usize> = self.scenario.clients[c]
                .nodes
                .iter()
                .enumerate()
                .filter(|&(_, &address)| self.routes[c][address] == s)
                .map(|(node, _)| node)
                .collect();
            for node in subscribed {
                let msg = Msg::Notify {
                    node,
                    channel: key.clone(),
                    payload: payload.clone(),
                };
                if loss > 0.0 && self.rng.random::<f64>() < loss {
                    let name = self.servers[s].name.clone();
                    self.log(&name, format_args!("notification to c{c} LOST {msg:?}"));
                    continue;
                }
                let (from, to) = (Endpoint::Server(s), Endpoint::Client(c));
                let mut deliveries = self.network.send(self.now, from, to, &mut self.rng);
                if duplicate > 0.0 && self.rng.random::<f64>() < duplicate {
                    deliveries.extend(deliveries.first().copied());
                }
                for at in deliveries {
                    let msg = msg.clone();
                    self.at(at + extra, Event::Deliver { from, to, msg });
                }
            }
        }
    }

    /// A spoofer's message on every up server's channel of the lock key.
    pub(super) fn spoof(&mut self, k: usize) {
        let spoof = &self.scenario.notifications.spoofs[k];
        let (payload_kind, every, end) = (spoof.payload, spoof.every, spoof.end);
        let key = Name::from(self.scenario_key());
        for s in 0..self.servers.len() {
            if !self.servers[s].up {
                continue;
            }
            let payload: Arc<[u8]> = match payload_kind {
                SpoofPayload::Junk => Arc::from(&b"junk"[..]),
                SpoofPayload::Holder => match self.servers[s].holder(&key, self.now) {
                    Some(holder) => Arc::from(&holder.to_hex()[..]),
                    None => continue,
                },
            };
            self.publish(s, &key, payload);
        }
        if self.now + every < end {
            self.at(self.now + every, Event::Spoof(k));
        }
    }
}
