//! The model of a check one step at a time, for another explorer to drive: the initial
//! state, the steps enabled in a state and the state each leads to, exactly as this
//! crate's explorer sees them. `benches/explorers.rs` runs stateright's explorer on it
//! beside this crate's, and both must count the same distinct states.

use super::CheckSpec;
use super::model::{Action, Model};
use super::property::Property;
use super::state::CheckState;

/// A check's model, stepped from outside ([`ModelSteps::initial`], [`ModelSteps::actions`],
/// [`ModelSteps::successor`]).
///
/// ```
/// use redlock_sim::check::{self, ModelSteps};
///
/// let text = "name = \"tiny\"\n[model]\nhorizon_ticks = 2\n[expect]\noutcome = \"no-violation\"\n";
/// let model = ModelSteps::new(check::parse(text, "inline").unwrap());
/// let start = model.initial();
/// let mut steps = Vec::new();
/// model.actions(&start, &mut steps);
/// let next = model.successor(&start, steps[0]);
/// assert!(next != start && next.violation().is_none());
/// ```
#[derive(Debug)]
pub struct ModelSteps {
    model: Model,
}

/// One state of a check's model. Equal states are the same state of the model; its `Hash`
/// covers every field, with no symmetry applied (clients keep their positions).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModelState(CheckState);

impl ModelSteps {
    /// The model of `spec`.
    pub fn new(spec: CheckSpec) -> Self {
        Self {
            model: Model::new(spec),
        }
    }

    /// The one initial state.
    pub fn initial(&self) -> ModelState {
        ModelState(self.model.initial())
    }

    /// The steps enabled in `state`, appended to `out`.
    pub fn actions(&self, state: &ModelState, out: &mut Vec<Action>) {
        self.model.actions(&state.0, out);
    }

    /// The state `action` leads to from `state`, judged: its
    /// [`violation`](ModelState::violation) says which *always* property it breaks.
    pub fn successor(&self, state: &ModelState, action: Action) -> ModelState {
        ModelState(self.model.successor(&state.0, action).0)
    }
}

impl ModelState {
    /// The *always* property this state breaks, if any.
    pub fn violation(&self) -> Option<Property> {
        self.0.violation
    }
}
