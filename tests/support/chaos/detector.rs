//! The overlap detector: who is inside each resource's critical section, in process time.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Counts the holders inside each resource's critical section and records every time a
/// holder enters while another is still inside.
///
/// Every client of a chaos run lives in this process, so "at the same time" is decided by
/// one sequentially consistent counter per resource: no clock comparison is involved.
/// A holder marks itself inside only after its lease was granted and found valid, and
/// leaves before releasing it, so two holders inside at once means two leases that were
/// both valid at once.
#[derive(Debug)]
pub struct Detector {
    inside: Vec<AtomicUsize>,
    overlaps: AtomicU64,
    examples: Mutex<Vec<Overlap>>,
}

/// One overlap: `entering` entered `resource` while `already_inside` others were in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// The resource's index.
    pub resource: usize,
    /// The client that entered.
    pub entering: usize,
    /// How many holders were already inside.
    pub already_inside: usize,
}

/// Proof of being inside a critical section; hand it back to [`Detector::leave`].
#[derive(Debug)]
#[must_use = "leave the critical section with Detector::leave"]
pub struct Inside {
    resource: usize,
}

/// How many overlaps are kept with their details (the count is always exact).
const EXAMPLES_KEPT: usize = 16;

impl Detector {
    /// A detector for `resources` resources, numbered from 0.
    pub fn new(resources: usize) -> Self {
        Self {
            inside: (0..resources).map(|_| AtomicUsize::new(0)).collect(),
            overlaps: AtomicU64::new(0),
            examples: Mutex::new(Vec::new()),
        }
    }

    /// Client `client` enters `resource`'s critical section. Returns whether it was alone.
    pub fn enter(&self, resource: usize, client: usize) -> (Inside, bool) {
        let already_inside = self.inside[resource].fetch_add(1, Ordering::SeqCst);
        let alone = already_inside == 0;
        if !alone {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
            if let Ok(mut examples) = self.examples.lock()
                && examples.len() < EXAMPLES_KEPT
            {
                examples.push(Overlap {
                    resource,
                    entering: client,
                    already_inside,
                });
            }
        }
        (Inside { resource }, alone)
    }

    /// Leaves the critical section entered with `inside`.
    pub fn leave(&self, inside: Inside) {
        self.inside[inside.resource].fetch_sub(1, Ordering::SeqCst);
    }

    /// How many times a holder entered while another was inside.
    pub fn overlaps(&self) -> u64 {
        self.overlaps.load(Ordering::SeqCst)
    }

    /// The first overlaps, with their details.
    pub fn examples(&self) -> Vec<Overlap> {
        self.examples.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_a_second_holder_and_nothing_else() {
        let detector = Detector::new(2);
        let (a, alone) = detector.enter(0, 1);
        assert!(alone);
        let (other, alone) = detector.enter(1, 2);
        assert!(alone, "another resource is independent");
        let (b, alone) = detector.enter(0, 3);
        assert!(!alone);
        detector.leave(a);
        // Still one inside (b): a third holder overlaps with it.
        let (c, alone) = detector.enter(0, 4);
        assert!(!alone);
        detector.leave(b);
        detector.leave(c);
        detector.leave(other);
        let (d, alone) = detector.enter(0, 5);
        assert!(alone);
        detector.leave(d);
        assert_eq!(detector.overlaps(), 2);
        assert_eq!(
            detector.examples()[0],
            Overlap {
                resource: 0,
                entering: 3,
                already_inside: 1
            }
        );
    }
}
