//! The DCQCN notification point (the paper's "NP"): a CE-marked request makes the receiving
//! QP send a CNP to the QP that sent it, at most one per `min_time_between_cnps`. The policy
//! only: the QP writes and sends the CNP (`qp/cnp.rs`).
//!
//! A connected QP has one sender, its peer. A UD QP hears from any: each sender (its address
//! and the source QPN of its DETH) gets CNPs of its own, at most one per gap each, and the
//! QP keeps the last CNP's time of the [`UD_SENDERS`] senders it notified last.

use std::collections::VecDeque;
use std::net::IpAddr;

use roce_wire::Qpn;

use crate::{Duration, Instant};

/// The senders a UD QP's notification point remembers, and the CNPs it keeps due at most: a
/// sender past them is notified again without the gap, and a CE mark that finds that many
/// CNPs due sends none (`rx_ce_without_cnp`). Bounded, so that no sender can grow a QP's state.
pub(crate) const UD_SENDERS: usize = 32;

/// A UD sender: its address and QPN.
pub(crate) type Sender = (IpAddr, Qpn);

/// The notification point of a UD QP, made at its first CE mark.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UdNotifier {
    /// Senders a CNP is due to, oldest mark first.
    due: VecDeque<Sender>,
    /// When the last CNP to each sender notified lately left, oldest first.
    last: VecDeque<(Sender, Instant)>,
}

impl UdNotifier {
    /// A CE-marked datagram from `sender` arrived at `now`: a CNP to it is due unless one is
    /// due already, one left less than `min_gap` ago, or [`UD_SENDERS`] are due (false then).
    pub(crate) fn on_ce(&mut self, sender: Sender, now: Instant, min_gap: Duration) -> bool {
        let recent = self
            .last
            .iter()
            .any(|&(s, at)| s == sender && now < at + min_gap);
        if recent || self.due.contains(&sender) {
            return true;
        }
        if self.due.len() >= UD_SENDERS {
            return false;
        }
        self.due.push_back(sender);
        true
    }

    /// The next sender a CNP is due to, no longer due.
    pub(crate) fn next(&mut self) -> Option<Sender> {
        self.due.pop_front()
    }

    /// The CNP to `sender` left at `now`.
    pub(crate) fn sent(&mut self, sender: Sender, now: Instant) {
        self.last.retain(|&(s, _)| s != sender);
        if self.last.len() >= UD_SENDERS {
            self.last.pop_front();
        }
        self.last.push_back((sender, now));
    }

    /// Whether a CNP is due.
    pub(crate) fn due(&self) -> bool {
        !self.due.is_empty()
    }
}

/// A QP's notification point.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Notifier {
    /// When the last CNP was sent.
    last: Option<Instant>,
    /// A CNP is to be sent.
    due: bool,
    /// CNPs sent.
    pub(crate) cnps_sent: u64,
    /// A UD QP's senders (none until its first CE mark: an idle QP stays small).
    pub(crate) ud: Option<Box<UdNotifier>>,
}

impl Notifier {
    /// Whether a CNP is to be sent (to the peer, or to a UD sender).
    pub(crate) fn due(&self) -> bool {
        self.due || self.ud.as_ref().is_some_and(|ud| ud.due())
    }

    /// A CE-marked request arrived at `now`: a CNP is due unless one was sent less than
    /// `min_gap` ago (mlx5 `min_time_between_cnps`; such CE marks send nothing, the firmware's
    /// rate limit, where htsim's NP sends one when the interval ends instead).
    pub(crate) fn on_ce(&mut self, now: Instant, min_gap: Duration) {
        if self.due || self.last.is_some_and(|last| now < last + min_gap) {
            return;
        }
        self.due = true;
    }

    /// The CNP due is being written: it is due no more.
    pub(crate) fn clear_due(&mut self) {
        self.due = false;
    }

    /// The CNP left at `now`.
    pub(crate) fn sent(&mut self, now: Instant) {
        self.last = Some(now);
        self.cnps_sent += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sender(n: u32) -> Sender {
        (IpAddr::from([198, 18, 0, 1]), Qpn::new(n))
    }

    /// A UD QP's notification point holds at most [`UD_SENDERS`] CNPs due, and remembers the
    /// gap of as many senders: past them, a mark sends nothing, and the state does not grow.
    #[test]
    fn a_ud_notifier_is_bounded_whatever_the_senders() {
        let (now, gap) = (Instant::from_micros(100), Duration::from_micros(4));
        let mut np = UdNotifier::default();
        for n in 0..UD_SENDERS as u32 {
            assert!(np.on_ce(sender(n), now, gap));
        }
        assert!(!np.on_ce(sender(1000), now, gap), "one more: no CNP");
        assert!(
            np.on_ce(sender(3), now, gap),
            "already due: nothing more to do"
        );
        assert_eq!(np.due.len(), UD_SENDERS);
        // Sent in the order the marks came; each then waits out its gap.
        for n in 0..UD_SENDERS as u32 {
            assert_eq!(np.next(), Some(sender(n)));
            np.sent(sender(n), now);
        }
        assert!(!np.due());
        assert!(np.on_ce(sender(0), now, gap));
        assert!(!np.due(), "within its gap");
        // A new sender pushes the oldest out of what is remembered: it is due again at once.
        np.sent(sender(1000), now);
        assert_eq!(np.last.len(), UD_SENDERS);
        assert!(np.on_ce(sender(0), now, gap));
        assert_eq!(np.next(), Some(sender(0)));
        assert!(np.on_ce(sender(1), now + gap, gap));
        assert_eq!(np.next(), Some(sender(1)), "its gap over");
    }
}
