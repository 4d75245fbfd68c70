//! The node's clock against this host's, from its `TIME` samples (estimated in
//! [`crate::doctor::clock`]): steps within the window, the offset, and the rate against the
//! drift factor. A step forward makes keys expire early; so does a clock that runs fast.

use std::time::Duration;

use crate::doctor::catalogue::{self, Condition};
use crate::doctor::clock::{ClockEstimate, Offset, Rate, Step};
use crate::doctor::finding::{Check, Finding, Level};
use crate::doctor::observe::{Limits, NodeObservation};
use crate::doctor::permissions::{Grant, grant_for};
use crate::duration::show;
use crate::numbers::{ms, pct, signed_pct, signed_us, us};

/// The worst clock rate the doctor calls "well inside" the drift factor, as a share of it:
/// the factor also covers the clients' clocks.
const RATE_MARGIN: f64 = 0.5;

/// An offset from this host's clock beyond which a node's clock is called unsynchronised.
const OFFSET_LIMIT: Duration = Duration::from_secs(1);

/// What to do about a clock that steps.
const SLEW: &str = "run NTP in slew mode on lock nodes (chronyd without makestep after boot, or \
                    ntpd -x) and never set their clocks by hand";

/// The steps, then the offset, then the rate; `estimate` is `None` when `TIME` gave nothing.
pub(super) fn judge_clock(
    limits: &Limits,
    node: &NodeObservation,
    estimate: Option<&ClockEstimate>,
) -> Vec<Finding> {
    if let Some(Err(why)) = &node.clock {
        return vec![judge_time_refused(limits, why)];
    }
    let Some(estimate) = estimate else {
        return Vec::new();
    };
    let mut findings: Vec<Finding> = estimate
        .steps
        .iter()
        .map(|step| judge_step(limits, step))
        .collect();
    findings.extend(estimate.offset.map(judge_offset));
    // A step forward is an error of its own; a rate measured across it means nothing.
    if estimate.steps.iter().any(|step| step.size_ms > 0.0) {
        return findings;
    }
    findings.push(match estimate.rate {
        Some(rate) => judge_rate(limits, rate),
        None => judge_rate_unknown(limits),
    });
    findings
}

/// `TIME` failed: the clock could not be checked at all.
fn judge_time_refused(limits: &Limits, why: &str) -> Finding {
    let remedy = match grant_for(why, &limits.key_prefix) {
        Grant::Command(rule) => format!("grant the doctor's user {rule}"),
        _ => "check that the node answers TIME".to_owned(),
    };
    Finding::new(
        Level::Warning,
        Check::ClockRate,
        Condition::Clocks,
        format!("the clock was not checked: TIME failed ({why})"),
    )
    .shown_by(catalogue::RL10_FAST)
    .remedy(remedy)
}

/// A jump within the window: forward expires keys early (an error), backward is harmless to
/// leases but shows that something steps this clock (a warning).
fn judge_step(limits: &Limits, step: &Step) -> Finding {
    if step.size_ms > 0.0 {
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
        .remedy(SLEW)
    } else {
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
        .remedy(SLEW)
    }
}

/// The offset from this host's clock: beyond [`OFFSET_LIMIT`] (past its error bound) one of
/// the two clocks is not synchronised, and will be stepped one day.
fn judge_offset(offset: Offset) -> Finding {
    let beyond = offset.offset_us.abs() - offset.bound_us;
    let text = format!(
        "clock {} from this host's (±{})",
        signed_us(offset.offset_us),
        us(offset.bound_us)
    );
    if beyond > OFFSET_LIMIT.as_secs_f64() * 1e6 {
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
        .remedy(format!("synchronise both with NTP; {SLEW}"))
    } else {
        Finding::new(Level::Ok, Check::ClockOffset, Condition::Clocks, text)
            .shown_by(catalogue::RL04_STEP_FORWARD)
    }
}

/// No rate: not measured (`--clock-window 0s`), or the window was too short to bound it.
fn judge_rate_unknown(limits: &Limits) -> Finding {
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
    .shown_by(catalogue::RL10_FAST)
}

/// The rate against the drift factor, with its error bound: surely faster (an error),
/// perhaps faster or more than half of it (warnings), slow (a note), or well inside.
fn judge_rate(limits: &Limits, rate: Rate) -> Finding {
    let drift = limits.drift_factor;
    let measured = format!(
        "clock rate {} (±{}) against this host's over {:.1} s, drift factor {}",
        signed_pct(rate.rate),
        pct(rate.bound),
        rate.span_s,
        pct(drift)
    );
    if rate.lower() > drift {
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
    }
}

/// A window long enough to bring `rate`'s bound under half the drift factor.
fn window_for(rate: Rate, drift: f64) -> Duration {
    let needed = rate.span_s * rate.bound / (drift * RATE_MARGIN);
    Duration::from_secs(needed.ceil().clamp(1.0, 3600.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{clock, fleet, limits, problems};
    use super::super::judge;
    use crate::doctor::catalogue::{self, Condition};
    use crate::doctor::finding::{Check, Level};

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
}
