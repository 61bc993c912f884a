//! PFC (802.1Qbb) at ingress, and RED/ECN marking: the switch's two signals to senders.

use roce_core::{Duration, Instant};
use roce_wire::frame::Ecn;

use super::{CLASSES, Frame, PauseFrame, Pfc, PortStats, SwitchConfig, SwitchOf};

impl<P: Frame> SwitchOf<P> {
    /// PFC at ingress: pause the host when its bytes held for `priority` pass XOFF, resume it
    /// below XON (IEEE 802.1Qbb); with a shared buffer, by the dynamic threshold instead
    /// (`shared.rs`).
    ///
    /// Twice per packet a switch forwards (as it is queued and as it leaves): inlined, and
    /// nothing is copied until a frame is due. Returns whether the port's host was left
    /// unpaused with no cause to pause it: then a check after bytes leave, with nothing
    /// charged meanwhile, finds nothing either (a share that only fell and a threshold that
    /// only rose cannot call for a PAUSE, and a resume needs a pause).
    #[inline(always)]
    pub(super) fn pfc_check(&mut self, now: Instant, ingress: usize, priority: usize) -> bool {
        let Some(pfc) = &self.config.pfc else {
            return true;
        };
        if priority >= CLASSES || pfc.priorities & (1 << priority) == 0 {
            return true;
        }
        let (pause, resume) = match &self.config.shared {
            Some(shared) => self.shared_pfc(shared, ingress, priority),
            None => {
                let held = self.ports[ingress].class[priority].held;
                (held > pfc.xoff_bytes, held <= pfc.xon_bytes)
            }
        };
        let paused = self.ports[ingress].paused_host[priority];
        if pause || (resume && paused) {
            // Rarely: most calls have nothing to send (and no division for the pause time).
            let pfc = *pfc;
            self.pfc_signal(&pfc, now, ingress, priority, (pause, resume));
        }
        !pause && !paused
    }

    /// Sends (or refreshes) the PAUSE or the resume that [`SwitchOf::pfc_check`] found due.
    #[cold]
    fn pfc_signal(
        &mut self,
        pfc: &Pfc,
        now: Instant,
        ingress: usize,
        priority: usize,
        (pause, resume): (bool, bool),
    ) {
        let latency = self.config.latency;
        let quanta_nanos = (u64::from(pfc.pause_quanta) * 512 * 1_000_000_000)
            .div_ceil(self.ports[ingress].rate_bps.max(1));
        let port = &mut self.ports[ingress];
        let at = now + latency;
        // XOFF, or a refresh before the last one runs out (senders would resume otherwise).
        let refresh = port.paused_host[priority] && at >= port.refresh_at[priority];
        if pause && (!port.paused_host[priority] || refresh) {
            port.paused_host[priority] = true;
            port.stats.pauses_sent += 1;
            let frame = PauseFrame {
                at,
                priority: priority as u8,
                until: at + Duration::from_nanos(quanta_nanos),
            };
            port.refresh_at[priority] = frame.refresh_at();
            port.refresh_due |= 1 << priority;
            port.pauses.push_back(frame);
        } else if resume && port.paused_host[priority] {
            port.paused_host[priority] = false;
            port.refresh_due &= !(1 << priority);
            port.stats.resumes_sent += 1;
            port.pauses.push_back(PauseFrame {
                at,
                priority: priority as u8,
                until: at,
            });
        }
    }
}

/// RED marking of an ECN-capable packet by the queue `queue_bytes` of its class.
pub(super) fn mark<P: Frame>(
    config: &SwitchConfig,
    rng: &mut u64,
    packet: &mut P,
    queue_bytes: usize,
    stats: &mut PortStats,
) {
    let Some(ecn) = config.ecn else { return };
    if !matches!(packet.ecn(), Ecn::Ect0 | Ecn::Ect1) {
        return;
    }
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let draw = (*rng >> 11) as f64 / (1u64 << 53) as f64;
    if draw < ecn.probability(queue_bytes) {
        packet.set_ecn(Ecn::Ce);
        stats.ce_marked += 1;
    }
}
