//! A node's clock against this host's, from `TIME` samples, with error bounds that hold
//! whatever the network did.
//!
//! A sample is a `TIME` request sent at host time `s` and answered at `e`: the node read its
//! clock at some instant in `[s, e]`. Nothing more is assumed (not even that the two
//! directions take the same time), so every estimate comes with the bound that follows from
//! the round trips alone:
//!
//! - **offset**: the node's wall clock minus this host's, at the middle of the sample with
//!   the shortest round trip: exact within half that round trip (plus the 1 µs of `TIME`'s
//!   resolution);
//! - **rate**: how much faster the node's clock runs than this host's monotonic clock
//!   (`+0.02` = 2 % fast), from two samples `a` and `b` (the pair whose round trips weigh
//!   least against the time between them). With `D` the time between their middles
//!   on this host, `h` half the sum of their round trips and `Δn` the node's elapsed time,
//!   the true rate lies in `[(Δn − 1 µs)/(D + h) − 1, (Δn + 1 µs)/(D − h) − 1]`; the estimate
//!   is `Δn/D − 1` and its bound the larger distance to either end, about `h / D`. On
//!   loopback (round trips well under a millisecond) a 2 s window gives a bound of a few
//!   hundredths of a percent; 40 ms round trips need a window of 10 s or more to resolve a
//!   1 % drift factor.
//! - **steps**: an interval between consecutive samples in which the node's clock moved more
//!   than [`STEP_TOLERANCE_NS`] (5 ms) away from what its median rate between consecutive
//!   samples predicts, beyond what the round trips and that rate's own uncertainty explain:
//!   someone (or a daemon in step mode) set the node's clock.
//!
//! The host's monotonic clock is what a client measures leases with; NTP slews it by at most
//! 0.05 %, far inside a 1 % drift factor.
//!
//! For a node on this host, one more comparison ([`start_step`]): `INFO`'s
//! `uptime_in_seconds` is the node's wall clock now minus at its start, while the process's
//! age read from `/proc` ([`process_age`]) counts on the boot-time clock, which nobody sets.
//! The two differ by more than [`START_STEP_TOLERANCE`] only if the wall clock was stepped
//! since the server started, as a time daemon's boot-time step does.

use std::time::Duration;

use serde::Serialize;

/// A clock change between two samples that is reported as a step rather than noise.
pub(crate) const STEP_TOLERANCE_NS: f64 = 5_000_000.0;

/// `TIME`'s resolution: it answers in whole microseconds.
const RESOLUTION_NS: f64 = 1_000.0;

/// One `TIME` request and its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct TimeSample {
    /// When it was sent, on this host's monotonic clock (ns since the collection started).
    pub(crate) sent_ns: i64,
    /// When the reply arrived, on the same clock.
    pub(crate) received_ns: i64,
    /// This host's wall clock when it was sent (µs since the Unix epoch).
    pub(crate) wall_sent_us: i64,
    /// This host's wall clock when the reply arrived.
    pub(crate) wall_received_us: i64,
    /// The node's answer (µs since the Unix epoch).
    pub(crate) node_us: i64,
}

impl TimeSample {
    fn round_trip_ns(&self) -> f64 {
        (self.received_ns - self.sent_ns) as f64
    }

    fn middle_ns(&self) -> f64 {
        (self.sent_ns as f64 + self.received_ns as f64) / 2.0
    }
}

/// The node's wall clock minus this host's.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct Offset {
    /// The estimate, in microseconds (positive: the node is ahead).
    pub(crate) offset_us: f64,
    /// The true offset is within this many microseconds of the estimate.
    pub(crate) bound_us: f64,
}

/// How much faster the node's clock runs than this host's.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct Rate {
    /// The estimate, as a fraction: `0.02` is 2 % fast, `-0.001` 0.1 % slow.
    pub(crate) rate: f64,
    /// The true rate is within this much of the estimate.
    pub(crate) bound: f64,
    /// The host time between the two samples the estimate rests on, in seconds.
    pub(crate) span_s: f64,
}

impl Rate {
    /// The fastest the node's clock can be running.
    pub(crate) fn upper(&self) -> f64 {
        self.rate + self.bound
    }

    /// The slowest it can be running.
    pub(crate) fn lower(&self) -> f64 {
        self.rate - self.bound
    }
}

/// A jump of the node's clock between two samples.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct Step {
    /// When, in seconds into the window.
    pub(crate) at_s: f64,
    /// By how much, in milliseconds: positive forward, negative backward.
    pub(crate) size_ms: f64,
}

/// What the samples say about a node's clock.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ClockEstimate {
    pub(crate) samples: usize,
    pub(crate) offset: Option<Offset>,
    /// `None` when the window is too short for the round trips.
    pub(crate) rate: Option<Rate>,
    pub(crate) steps: Vec<Step>,
}

/// Estimates offset, rate and steps from `samples` (in the order they were taken).
pub(crate) fn estimate(samples: &[TimeSample]) -> ClockEstimate {
    let rate = rate(samples);
    let typical = median_rate(samples)
        .or(rate.map(|r| (r.rate, r.bound)))
        .unwrap_or((0.0, 0.0));
    ClockEstimate {
        samples: samples.len(),
        offset: offset(samples),
        rate,
        steps: steps(samples, typical.0, typical.1),
    }
}

/// The offset from the sample with the shortest round trip.
pub(crate) fn offset(samples: &[TimeSample]) -> Option<Offset> {
    let best = samples
        .iter()
        .filter(|s| s.wall_received_us >= s.wall_sent_us)
        .min_by(|a, b| a.round_trip_ns().total_cmp(&b.round_trip_ns()))?;
    let wall_middle = (best.wall_sent_us as f64 + best.wall_received_us as f64) / 2.0;
    Some(Offset {
        offset_us: best.node_us as f64 - wall_middle,
        bound_us: (best.wall_received_us - best.wall_sent_us) as f64 / 2.0 + 1.0,
    })
}

/// The rate from the pair of samples whose round trips weigh least against the time between
/// them (the pair with the tightest bound), with its bound.
pub(crate) fn rate(samples: &[TimeSample]) -> Option<Rate> {
    let mut best: Option<(f64, TimeSample, TimeSample)> = None;
    for (index, a) in samples.iter().enumerate() {
        for b in &samples[index + 1..] {
            let span = b.middle_ns() - a.middle_ns();
            let slack = (a.round_trip_ns() + b.round_trip_ns()) / 2.0;
            if span <= slack {
                continue;
            }
            let weight = (slack + RESOLUTION_NS) / (span - slack);
            if best.is_none_or(|(least, _, _)| weight < least) {
                best = Some((weight, *a, *b));
            }
        }
    }
    let (_, a, b) = best?;
    let span = b.middle_ns() - a.middle_ns();
    let slack = (a.round_trip_ns() + b.round_trip_ns()) / 2.0;
    let node = (b.node_us - a.node_us) as f64 * 1_000.0;
    let rate = node / span - 1.0;
    let lowest = (node - RESOLUTION_NS) / (span + slack) - 1.0;
    let highest = (node + RESOLUTION_NS) / (span - slack) - 1.0;
    Some(Rate {
        rate,
        bound: (highest - rate).max(rate - lowest),
        span_s: span / 1e9,
    })
}

/// The rate between consecutive samples whose rate is the median, with that rate's own
/// uncertainty (half the two round trips over the interval): a rate one step cannot move.
fn median_rate(samples: &[TimeSample]) -> Option<(f64, f64)> {
    let mut rates: Vec<(f64, f64)> = samples
        .windows(2)
        .filter_map(|pair| {
            let span = pair[1].middle_ns() - pair[0].middle_ns();
            let slack = (pair[0].round_trip_ns() + pair[1].round_trip_ns()) / 2.0;
            (span > slack).then(|| {
                let moved = (pair[1].node_us - pair[0].node_us) as f64 * 1_000.0;
                (moved / span - 1.0, (slack + RESOLUTION_NS) / (span - slack))
            })
        })
        .collect();
    if rates.is_empty() {
        return None;
    }
    rates.sort_by(|a, b| a.0.total_cmp(&b.0));
    Some(rates[rates.len() / 2])
}

/// Intervals in which the node's clock moved more than [`STEP_TOLERANCE_NS`] beyond what
/// `rate` (known within `rate_bound`) and the round trips explain.
pub(crate) fn steps(samples: &[TimeSample], rate: f64, rate_bound: f64) -> Vec<Step> {
    let start = samples.first().map_or(0.0, TimeSample::middle_ns);
    samples
        .windows(2)
        .filter_map(|pair| {
            let (a, b) = (pair[0], pair[1]);
            let span = b.middle_ns() - a.middle_ns();
            let moved = (b.node_us - a.node_us) as f64 * 1_000.0;
            let deviation = moved - span * (1.0 + rate);
            let explained = (a.round_trip_ns() + b.round_trip_ns()) / 2.0
                + 2.0 * RESOLUTION_NS
                + span.abs() * rate_bound;
            (deviation.abs() > explained + STEP_TOLERANCE_NS).then(|| Step {
                at_s: (a.middle_ns() - start) / 1e9,
                size_ms: deviation / 1e6,
            })
        })
        .collect()
}

/// How far `INFO`'s uptime may differ from the process's age without a step: the uptime is
/// in whole seconds (up to 1 s low), Redis reads its cached clock (up to a tick late) and
/// sets its start time a moment after the process started.
pub(crate) const START_STEP_TOLERANCE: Duration = Duration::from_secs(2);

/// What `INFO`'s uptime says against the server process's age on the boot-time clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StartStep {
    /// Within [`START_STEP_TOLERANCE`]: no step since the server started.
    None,
    /// The uptime reads high by this much: the wall clock was stepped forward.
    Forward(Duration),
    /// The uptime reads low by this much: the wall clock was stepped back.
    Backward(Duration),
}

/// Compares `uptime` (`INFO`'s `uptime_in_seconds`, wall clock) with `process_age` (the
/// same server's age on the boot-time clock, from [`process_age`]).
pub(crate) fn start_step(uptime: Duration, process_age: Duration) -> StartStep {
    if uptime > process_age + START_STEP_TOLERANCE {
        StartStep::Forward(uptime - process_age)
    } else if process_age > uptime + START_STEP_TOLERANCE {
        StartStep::Backward(process_age - uptime)
    } else {
        StartStep::None
    }
}

/// A process's age from its `/proc/<pid>/stat` line (field 22: the start time, in clock
/// ticks after boot), `/proc/uptime` (seconds since boot) and the clock ticks per second.
/// `None` when either text is not what Linux writes.
pub(crate) fn process_age(stat: &str, uptime: &str, ticks_per_second: u64) -> Option<Duration> {
    if ticks_per_second == 0 {
        return None;
    }
    // The command name (field 2) is in parentheses and may hold spaces or parentheses of its
    // own: the fields are counted from the last `)`, where field 3 starts.
    let (_, rest) = stat.rsplit_once(')')?;
    let start_ticks: u64 = rest.split_whitespace().nth(22 - 3)?.parse().ok()?;
    let since_boot: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    if !since_boot.is_finite() || since_boot < 0.0 {
        return None;
    }
    let started = Duration::from_secs(start_ticks / ticks_per_second)
        + Duration::from_nanos((start_ticks % ticks_per_second) * 1_000_000_000 / ticks_per_second);
    Duration::try_from_secs_f64(since_boot)
        .ok()?
        .checked_sub(started)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/proc/<pid>/stat` line of a process started `start_ticks` after boot, with a
    /// command name that holds a space and a parenthesis.
    fn stat_line(start_ticks: u64) -> String {
        format!(
            "4242 (redis-server (x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 12 8 0 0 20 0 5 0 \
             {start_ticks} 123456789 2000 18446744073709551615 1 1 0 0 0 0 0 4097 17642 0 0 0 \
             17 1 0 0 0 0 0"
        )
    }

    #[test]
    fn a_process_age_is_read_from_proc() {
        // Started 1,000.50 s after boot (ticks of 10 ms), now 4,600.75 s after boot.
        let age = process_age(&stat_line(100_050), "4600.75 9000.00\n", 100).unwrap();
        assert_eq!(age, Duration::from_millis(3_600_250));
        assert_eq!(process_age(&stat_line(100_050), "4600.75", 0), None);
        // Started "after" now: not a process of this boot.
        assert_eq!(process_age(&stat_line(900_000), "4600.75", 100), None);
        assert_eq!(process_age("4242 (redis-server) S 1", "4600.75", 100), None);
        assert_eq!(process_age(&stat_line(100_050), "soon", 100), None);
        assert_eq!(process_age(&stat_line(100_050), "-1.0", 100), None);
        assert_eq!(process_age(&stat_line(100_050), "inf", 100), None);
    }

    #[test]
    fn a_clock_stepped_after_the_start_shows_between_uptime_and_age() {
        let hour = Duration::from_secs(3_600);
        // A node started 40 s ago on the boot-time clock; the time daemon then stepped the
        // wall clock forward by 2 h, so INFO says 2 h 40 s.
        let age = Duration::from_millis(40_250);
        let uptime = Duration::from_secs(2 * 3_600 + 40);
        assert_eq!(
            start_step(uptime, age),
            StartStep::Forward(Duration::from_millis(2 * 3_600_000 - 250))
        );
        // Stepped back by an hour: the uptime reads low.
        assert_eq!(
            start_step(Duration::from_secs(60), hour + Duration::from_secs(60)),
            StartStep::Backward(hour)
        );
        // Whole seconds, the cached clock and the start-up moment: no step.
        assert_eq!(start_step(Duration::from_secs(40), age), StartStep::None);
        assert_eq!(start_step(Duration::from_secs(39), age), StartStep::None);
        assert_eq!(start_step(Duration::from_secs(42), age), StartStep::None);
        assert_eq!(
            start_step(Duration::ZERO, Duration::from_millis(300)),
            StartStep::None
        );
        assert!(matches!(
            start_step(Duration::from_secs(43), age),
            StartStep::Forward(_)
        ));
    }

    /// Samples every `every_ms` over `count` samples of a node clock running `rate` fast,
    /// `offset_us` ahead, with round trips of `rtt_us` where the node reads its clock
    /// `at` of the way through each round trip (0.0: as the request leaves, 1.0: as the
    /// reply arrives).
    fn samples(
        count: i64,
        every_ms: i64,
        rate: f64,
        offset_us: i64,
        rtt_us: i64,
        at: f64,
    ) -> Vec<TimeSample> {
        let wall_base = 1_700_000_000_000_000_i64;
        (0..count)
            .map(|i| {
                let sent_ns = i * every_ms * 1_000_000;
                let received_ns = sent_ns + rtt_us * 1_000;
                let read_ns = sent_ns as f64 + at * (rtt_us * 1_000) as f64;
                TimeSample {
                    sent_ns,
                    received_ns,
                    wall_sent_us: wall_base + sent_ns / 1_000,
                    wall_received_us: wall_base + received_ns / 1_000,
                    node_us: wall_base + offset_us + (read_ns * (1.0 + rate) / 1_000.0) as i64,
                }
            })
            .collect()
    }

    #[test]
    fn the_rate_is_found_within_its_bound_wherever_the_node_reads_its_clock() {
        for at in [0.0, 0.5, 1.0] {
            for rate in [0.0, 0.02, -0.005] {
                let estimate = estimate(&samples(21, 100, rate, 0, 800, at));
                let found = estimate.rate.unwrap();
                assert!(
                    (found.rate - rate).abs() <= found.bound,
                    "at {at}, rate {rate}: {found:?}"
                );
                // 0.8 ms round trips over 2 s: a bound of about 0.04 %.
                assert!(found.bound < 0.0005, "{found:?}");
                assert!(estimate.steps.is_empty(), "{:?}", estimate.steps);
            }
        }
    }

    #[test]
    fn the_worst_asymmetry_still_lands_inside_the_bound() {
        // The node reads its clock as the request arrives in the first samples and as the
        // reply leaves in the last ones: the estimate is off by the most the bound allows.
        let mut early = samples(21, 100, 0.01, 0, 2_000, 0.0);
        let late = samples(21, 100, 0.01, 0, 2_000, 1.0);
        early[14..].copy_from_slice(&late[14..]);
        let found = rate(&early).unwrap();
        assert!((found.rate - 0.01).abs() <= found.bound, "{found:?}");
        assert!(found.rate > 0.01, "the skew shows: {found:?}");
    }

    #[test]
    fn the_offset_is_bounded_by_half_the_shortest_round_trip() {
        let found = offset(&samples(5, 10, 0.0, 250_000, 1_000, 0.0)).unwrap();
        assert!(
            (found.offset_us - 250_000.0).abs() <= found.bound_us,
            "{found:?}"
        );
        assert!((found.bound_us - 501.0).abs() < 1e-9, "{found:?}");
    }

    #[test]
    fn a_window_shorter_than_the_round_trips_gives_no_rate() {
        assert_eq!(rate(&samples(3, 0, 0.0, 0, 40_000, 0.5)), None);
        assert_eq!(rate(&samples(1, 100, 0.0, 0, 100, 0.5)), None);
        assert_eq!(offset(&[]), None);
    }

    #[test]
    fn a_step_forward_is_found_and_placed() {
        let mut stepped = samples(21, 100, 0.0, 0, 500, 0.5);
        for sample in &mut stepped[12..] {
            sample.node_us += 500_000;
        }
        let estimate = estimate(&stepped);
        assert_eq!(estimate.steps.len(), 1, "{:?}", estimate.steps);
        let step = estimate.steps[0];
        assert!((step.size_ms - 500.0).abs() < 1.0, "{step:?}");
        assert!((step.at_s - 1.1).abs() < 0.01, "{step:?}");
        // A steady 2 % fast clock is a rate, not a series of steps.
        assert!(estimate_steps_of(0.02).is_empty());
    }

    #[test]
    fn irregular_sampling_is_not_a_step() {
        // A busy machine: samples back to back, then a long stall, with the node reading its
        // clock at either end of each round trip.
        let wall = 1_700_000_000_000_000_i64;
        let sent = [0_i64, 900_000, 80_000_000, 80_700_000, 190_000_000];
        let at = [0.0, 1.0, 0.0, 1.0, 0.0];
        let samples: Vec<TimeSample> = sent
            .iter()
            .zip(at)
            .map(|(&sent_ns, at)| {
                let received_ns = sent_ns + 600_000;
                let read_ns = sent_ns as f64 + at * 600_000.0;
                TimeSample {
                    sent_ns,
                    received_ns,
                    wall_sent_us: wall + sent_ns / 1_000,
                    wall_received_us: wall + received_ns / 1_000,
                    node_us: wall + (read_ns * 1.02 / 1_000.0) as i64,
                }
            })
            .collect();
        assert_eq!(estimate(&samples).steps, []);
    }

    fn estimate_steps_of(rate: f64) -> Vec<Step> {
        estimate(&samples(21, 100, rate, 0, 500, 0.5)).steps
    }
}
