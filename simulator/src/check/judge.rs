//! The properties judged after a step: what the step did (its [`Happened`]) and the state
//! it led to, against the check's *always* and *sometimes* properties.

use super::client::Happened;
use super::property::Property;
use super::spec::CheckSpec;
use super::state::CheckState;

/// Checks the *always* properties in `state`, the state a step led to, recording the first
/// broken one in it, and returns the *sometimes* ones the step reached (bits of
/// [`Property::bit`]).
pub(super) fn judge(spec: &CheckSpec, state: &mut CheckState, happened: Happened) -> u8 {
    let mut reached = 0;
    if let Some(fence) = happened.granted {
        reached |= Property::Grant.bit();
        if happened.handed_off {
            reached |= Property::HandOff.bit();
        }
        if spec.config.fencing() && spec.always & Property::FencesIncrease.bit() != 0 {
            let fence = fence.unwrap_or(0);
            if fence <= state.max_fence {
                state.violation = Some(Property::FencesIncrease);
            }
            state.max_fence = state.max_fence.max(fence);
        }
    }
    if happened.extended {
        reached |= Property::Extension.bit();
    }
    if state.violation.is_none() {
        let judged = |p: Property| spec.always & p.bit() != 0;
        let believers = state.clients.iter().filter(|c| c.believes(spec)).count();
        if (believers > 1 || happened.revived_over_another) && judged(Property::MutualExclusion) {
            state.violation = Some(Property::MutualExclusion);
        } else if judged(Property::StopBeforeRelease) && happened.released_live_key {
            state.violation = Some(Property::StopBeforeRelease);
        } else if judged(Property::WaiterTold) && happened.waiter_untold {
            state.violation = Some(Property::WaiterTold);
        }
    }
    reached
}
