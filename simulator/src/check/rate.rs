//! How far a clock may stray from true time: at most `limit` ticks gained (or lost) in any
//! window of one TTL, the drift bound the guarantees state ("no client clock runs slower,
//! and no node clock faster, than the drift factor over one TTL"), in whole ticks.

/// The ticks in which a clock strayed, over the last window: bit `i` is set when it gained
/// (or lost) a tick `i` ticks ago.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Strays(u32);

impl Strays {
    /// Whether the clock may stray once more now, within `limit` per window.
    pub(super) fn may_stray(self, limit: u32) -> bool {
        self.0.count_ones() < limit
    }

    /// One tick of true time passes, in which the clock strayed or not. What is kept is the
    /// `window - 1` ticks before the next one: with it, they make the window that
    /// [`may_stray`](Self::may_stray) counts for the next tick.
    pub(super) fn tick(&mut self, strayed: bool, window: u32) {
        let kept = window.saturating_sub(1).min(31);
        let mask = (1u32 << kept) - 1;
        self.0 = ((self.0 << 1) | u32::from(strayed)) & mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_limit_strays_in_any_window() {
        // A window of three ticks, one stray in it: after a stray, the next two ticks fall
        // in a window with it, the third does not.
        let mut s = Strays::default();
        s.tick(true, 3);
        assert!(!s.may_stray(1));
        s.tick(false, 3);
        assert!(
            !s.may_stray(1),
            "the stray two ticks ago shares a window of three with this"
        );
        s.tick(false, 3);
        assert!(
            s.may_stray(1),
            "three ticks later, a window of three holds only this one"
        );
        assert!(Strays::default().may_stray(1) && !Strays::default().may_stray(0));
        // A window of one tick: a stray every tick.
        let mut every = Strays::default();
        every.tick(true, 1);
        assert!(every.may_stray(1));
    }
}
