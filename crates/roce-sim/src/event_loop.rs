//! What [`Pair`](crate::Pair), [`Net`](crate::Net) and [`Fabric`](crate::Fabric) share: a
//! clock that jumps from one event to the next, and the way to run it until a condition holds.

use roce_core::Instant;

/// A simulation driven one event at a time.
pub(crate) trait EventLoop {
    /// The simulated time.
    fn clock(&self) -> Instant;
    /// Runs everything due now and moves the clock to the next event; false when none is left.
    fn next_event(&mut self) -> bool;
    /// Runs everything that can happen at the current time, until nothing more does.
    fn settle(&mut self);
}

/// Steps `sim` until `done(sim)` holds or `deadline` passes; returns whether it held.
pub(crate) fn drive_while<T: EventLoop>(
    sim: &mut T,
    deadline: Instant,
    mut done: impl FnMut(&mut T) -> bool,
) -> bool {
    loop {
        if done(sim) {
            return true;
        }
        if sim.clock() >= deadline || !sim.next_event() {
            sim.settle();
            return done(sim);
        }
    }
}
