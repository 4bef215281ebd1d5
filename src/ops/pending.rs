//! Updates held by time until an operator's input has passed that time:
//! what the operators that release state (`closing_window`,
//! `closing_interval_join`) apply one whole epoch at a time, in time
//! order.
//!
//! Invariant: each held time keeps a capability for it, so the operator
//! may still send that time's output when it releases the updates; a time
//! is released only once `passed` says no more updates at it can come.

use std::collections::BTreeMap;

use timely::dataflow::operators::Capability;

use crate::job::Time;

/// Updates per time, with a capability for each time.
pub struct Pending<D> {
    by_time: BTreeMap<Time, (Capability<Time>, Vec<D>)>,
}

impl<D> Default for Pending<D> {
    fn default() -> Self {
        Pending {
            by_time: BTreeMap::new(),
        }
    }
}

impl<D> Pending<D> {
    /// Holds `update` at time `t`; `capability` is asked for one only the
    /// first time `t` is held.
    pub fn hold(&mut self, t: Time, capability: impl FnOnce() -> Capability<Time>, update: D) {
        self.by_time
            .entry(t)
            .or_insert_with(|| (capability(), Vec::new()))
            .1
            .push(update);
    }

    /// The earliest held time, if `passed` says the input is past it: its
    /// capability and its updates, no longer held.
    pub fn release(
        &mut self,
        passed: impl Fn(&Time) -> bool,
    ) -> Option<(Time, Capability<Time>, Vec<D>)> {
        let entry = self.by_time.first_entry()?;
        if !passed(entry.key()) {
            return None;
        }
        let (t, (capability, updates)) = entry.remove_entry();
        Some((t, capability, updates))
    }
}
