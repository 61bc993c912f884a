//! The doorbell: how a verb tells the device's task that there is work (a WR to send, a QP
//! whose timers changed), as a NIC's doorbell register is written after a WQE is placed in the
//! send queue (rxe: `rxe_post_send` schedules the requester task once, whatever the number of
//! WRs). Ringing a rung bell does nothing: a burst of posts wakes the task at most once.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub(crate) struct Doorbell {
    rung: AtomicBool,
    bell: Notify,
}

impl Doorbell {
    /// Tells the task there is work; wakes it only if no ring is pending.
    pub(crate) fn ring(&self) {
        if !self.rung.swap(true, Ordering::SeqCst) {
            self.bell.notify_one();
        }
    }

    /// Waits for a ring (at once if one is pending), and answers it: a ring after this returns
    /// wakes the task again.
    pub(crate) async fn answered(&self) {
        self.bell.notified().await;
        self.rung.store(false, Ordering::SeqCst);
    }

    /// Whether a ring waits to be answered.
    #[cfg(test)]
    pub(crate) fn is_rung(&self) -> bool {
        self.rung.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_of_rings_wakes_the_task_once() {
        let bell = Doorbell::default();
        bell.ring();
        bell.ring();
        bell.ring();
        assert!(bell.is_rung());
        bell.answered().await;
        assert!(!bell.is_rung());
        // The three rings made one wake-up: no permit is left for a second one.
        let again = tokio::time::timeout(std::time::Duration::from_millis(20), bell.answered());
        assert!(again.await.is_err(), "a second wake-up from the same burst");
        // A ring after the answer wakes it again.
        bell.ring();
        bell.answered().await;
    }
}
