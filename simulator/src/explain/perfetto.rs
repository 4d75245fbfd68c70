//! The run in Perfetto's own trace format (`explain --perfetto PATH`), protobuf
//! `TracePacket`s, for runs too long for Chrome's JSON (which its viewers stop reading near a
//! million events): a track per lane (clients, servers, the resource) with its messages sent
//! and received as instants, and a track beneath each client for its windows (slices of
//! belief), each server for its lock keys, and the resource for its accesses. Every message
//! that arrived is a flow from its send to its arrival; a lost one is an instant without a
//! flow. Timestamps are nanoseconds of true time.
//!
//! The messages are declared here with prost's derive (no generated code, no build step):
//! only the fields written, with the numbers of Perfetto's `trace_packet.proto`,
//! `track_descriptor.proto` and `track_event.proto` (proto2: repeated fields unpacked).

use super::derived::{Derived, LaneKind};
use crate::Run;
use crate::scenario::Scenario;
use crate::time::Nanos;

/// A trace: its packets.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// One packet: a track's description, or an event on a track at a timestamp.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

/// A track: its id, name, and the track it is drawn under.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
}

/// An event on a track: a slice's begin or end, or an instant; with the flows it starts or
/// ends.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    /// [`SLICE_BEGIN`], [`SLICE_END`] or [`INSTANT`].
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `TrackEvent.Type`'s values used here.
pub const SLICE_BEGIN: i32 = 1;
pub const SLICE_END: i32 = 2;
pub const INSTANT: i32 = 3;

/// The one sequence every packet is written on.
const SEQUENCE: u32 = 1;

/// A lane's track id; the id of the track beneath it (windows, keys or accesses) is the
/// next one.
fn lane_track(lane: usize) -> u64 {
    2 * lane as u64 + 1
}

/// The events, each (timestamp, event), in the order made: sorted by timestamp later,
/// stably, so that at one instant a slice's end comes before the next one's begin.
#[derive(Default)]
struct Events(Vec<(Nanos, TrackEvent)>);

impl Events {
    fn push(&mut self, at: Nanos, kind: i32, track: u64, name: Option<String>) -> &mut TrackEvent {
        self.0.push((
            at,
            TrackEvent {
                r#type: Some(kind),
                track_uuid: Some(track),
                name,
                ..TrackEvent::default()
            },
        ));
        let last = self.0.len() - 1;
        &mut self.0[last].1
    }

    fn slice(&mut self, track: u64, from: Nanos, until: Nanos, name: String) {
        self.push(from, SLICE_BEGIN, track, Some(name));
        self.push(until.max(from), SLICE_END, track, None);
    }
}

/// The run as a Perfetto trace (protobuf bytes). Needs the run's recording (a run with its
/// trace, as `explain` makes) for the messages; without it, the trace has none.
pub fn trace(scenario: &Scenario, run: &Run) -> Vec<u8> {
    use prost::Message as _;
    let derived = Derived::new(scenario, run);
    let mut packet: Vec<TracePacket> = Vec::new();
    for (i, lane) in derived.lanes.iter().enumerate() {
        let beneath = match lane.kind {
            LaneKind::Client => "windows",
            LaneKind::Server => "lock keys",
            LaneKind::Resource => "accesses",
        };
        for (uuid, name, parent) in [
            (lane_track(i), lane.name.clone(), None),
            (
                lane_track(i) + 1,
                format!("{} {beneath}", lane.name),
                Some(lane_track(i)),
            ),
        ] {
            packet.push(TracePacket {
                trusted_packet_sequence_id: Some(SEQUENCE),
                track_descriptor: Some(TrackDescriptor {
                    uuid: Some(uuid),
                    name: Some(name),
                    parent_uuid: parent,
                }),
                ..TracePacket::default()
            });
        }
    }
    let mut events = Events::default();
    slices(&mut events, &derived, run);
    messages(&mut events, &derived, run);
    events.0.sort_by_key(|(at, _)| *at);
    packet.extend(events.0.into_iter().map(|(at, event)| TracePacket {
        timestamp: Some(at),
        trusted_packet_sequence_id: Some(SEQUENCE),
        track_event: Some(event),
        ..TracePacket::default()
    }));
    Trace { packet }.encode_to_vec()
}

/// The windows of each lease beneath its client, the keys beneath their server, and the
/// accesses beneath the resource (from their send to their arrival).
fn slices(events: &mut Events, derived: &Derived, run: &Run) {
    let history = &run.history;
    for (lease, view) in history.leases.iter().zip(&derived.leases) {
        for &(from, until) in &view.windows {
            let name = format!("epoch {} (fence {})", lease.epoch, lease.fence);
            events.slice(lane_track(lease.client) + 1, from, until, name);
        }
    }
    let first_server = derived.clients();
    for (key, epoch) in history.keys.iter().zip(&derived.key_epochs) {
        let name = epoch.map_or_else(
            || "key of a failed round".to_owned(),
            |e| format!("key of epoch {e}"),
        );
        let until = key.until.min(derived.end);
        events.slice(
            lane_track(first_server + key.server) + 1,
            key.from,
            until,
            name,
        );
    }
    let resource = derived.lanes.len() - 1;
    for (i, (access, fates)) in history.accesses.iter().zip(&derived.fates).enumerate() {
        let name = format!(
            "{:?} #{i} epoch {}: {}",
            access.kind,
            access.epoch,
            super::fate_word(fates[0])
        );
        let arrived = access.arrived_at.unwrap_or(access.sent_at);
        events.slice(lane_track(resource) + 1, access.sent_at, arrived, name);
    }
}

/// Each message: an instant on its sender's track when sent that starts a flow, and one on
/// its receiver's track when it arrived that ends it (flow ids from 1, in the order sent).
fn messages(events: &mut Events, derived: &Derived, run: &Run) {
    let Some(recording) = &run.recording else {
        return;
    };
    for (i, m) in recording.messages.iter().enumerate() {
        let (Some(from), Some(to)) = (derived.lane_of(&m.from), derived.lane_of(&m.to)) else {
            continue;
        };
        let flow = i as u64 + 1;
        match m.arrives_at {
            Some(at) => {
                let name = format!("{} \u{2192} {}", m.label, m.to);
                events
                    .push(m.sent_at, INSTANT, lane_track(from), Some(name))
                    .flow_ids
                    .push(flow);
                let name = format!("{} \u{2190} {}", m.label, m.from);
                events
                    .push(at, INSTANT, lane_track(to), Some(name))
                    .terminating_flow_ids
                    .push(flow);
            }
            None => {
                let name = format!("{} \u{2192} {} (lost)", m.label, m.to);
                events.push(m.sent_at, INSTANT, lane_track(from), Some(name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;

    use prost::Message as _;

    use super::*;

    /// RL-02's trace, decoded back: a track per lane and one beneath it; every message that
    /// arrived is one flow, from an instant on its sender's track at the send to one on its
    /// receiver's at the arrival; every slice begun on a track ends on it.
    #[test]
    fn the_trace_decodes_to_tracks_slices_and_flows() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/rl-02-pause-15s.toml");
        let scenario = Scenario::load(&path).unwrap();
        let run = crate::run(&scenario, scenario.seed, true).unwrap();
        let trace = Trace::decode(trace(&scenario, &run).as_slice()).unwrap();
        let tracks: BTreeMap<u64, String> = trace
            .packet
            .iter()
            .filter_map(|p| p.track_descriptor.as_ref())
            .map(|d| (d.uuid.unwrap(), d.name.clone().unwrap()))
            .collect();
        let names: Vec<&str> = tracks.values().map(String::as_str).collect();
        for lane in [
            "c1",
            "c2",
            "n0",
            "n4",
            "resource",
            "c1 windows",
            "n2 lock keys",
        ] {
            assert!(names.contains(&lane), "{lane}: {names:?}");
        }
        let track_of = |name: &str| *tracks.iter().find(|(_, n)| *n == name).unwrap().0;
        let recording = run.recording.as_ref().unwrap();
        let mut starts: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut ends: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut open: BTreeMap<u64, i64> = BTreeMap::new();
        let mut last = 0;
        for p in &trace.packet {
            let Some(e) = &p.track_event else { continue };
            let (at, track) = (p.timestamp.unwrap(), e.track_uuid.unwrap());
            assert!(at >= last, "packets in time order");
            last = at;
            for &f in &e.flow_ids {
                assert!(
                    starts.insert(f, (track, at)).is_none(),
                    "flow {f} starts twice"
                );
            }
            for &f in &e.terminating_flow_ids {
                assert!(ends.insert(f, (track, at)).is_none(), "flow {f} ends twice");
            }
            match e.r#type {
                Some(SLICE_BEGIN) => *open.entry(track).or_default() += 1,
                Some(SLICE_END) => *open.entry(track).or_default() -= 1,
                _ => {}
            }
            assert!(open.values().all(|&n| n >= 0), "an end before its begin");
        }
        assert!(open.values().all(|&n| n == 0), "{open:?}");
        let arrived: Vec<_> = recording
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.arrives_at.is_some())
            .collect();
        assert!(arrived.len() > 2_000, "{}", arrived.len());
        assert_eq!(starts.len(), arrived.len());
        assert_eq!(ends.len(), arrived.len());
        for (i, m) in arrived {
            let flow = i as u64 + 1;
            assert_eq!(starts[&flow], (track_of(&m.from), m.sent_at), "{m:?}");
            assert_eq!(
                ends[&flow],
                (track_of(&m.to), m.arrives_at.unwrap()),
                "{m:?}"
            );
        }
    }
}
