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

    /// One tick of true time passes, in which the clock strayed or not; `window` ticks are
    /// remembered.
    pub(super) fn tick(&mut self, strayed: bool, window: u32) {
        let mask = if window >= 32 {
            u32::MAX
        } else {
            (1 << window) - 1
        };
        // Bit 0 is this tick; after `window - 1` shifts it leaves the window.
        self.0 = ((self.0 << 1) | u32::from(strayed)) & mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_limit_strays_in_any_window() {
        let mut s = Strays::default();
        s.tick(true, 3);
        assert!(!s.may_stray(1));
        s.tick(false, 3);
        assert!(!s.may_stray(1));
        s.tick(false, 3);
        assert!(
            !s.may_stray(1),
            "the stray two ticks ago is still in a window of three"
        );
        s.tick(false, 3);
        assert!(s.may_stray(1));
        assert!(Strays::default().may_stray(1) && !Strays::default().may_stray(0));
    }
}
