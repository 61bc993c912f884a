//! PFC (802.1Qbb): the pauses a switch sends at ingress and obeys at egress, PFC deadlock
//! detection's view of paused queues; and RED/ECN marking: the switch's two signals to senders.

use roce_core::{Duration, Instant};
use roce_wire::frame::Ecn;

use super::{CLASSES, Frame, PauseFrame, Pfc, PortStats, SwitchConfig, SwitchOf};

impl<P: Frame> SwitchOf<P> {
    /// The host on `port` paused the switch's egress towards it for `priority` until `until`
    /// (a PFC frame it sent; `until <= now` resumes at once, as a zero-quanta frame does). A
    /// packet already being sent finishes (802.1Qbb); the class waits after it.
    pub fn pause_egress(&mut self, now: Instant, port: usize, priority: u8, until: Instant) {
        if !self.set_egress_pause(now, port, priority, until) {
            self.start(now, port);
        }
    }

    /// [`SwitchOf::pause_egress`] for an event driver: records the pause and starts nothing
    /// (the driver calls [`SwitchOf::depart`]). Returns whether the class is paused now.
    pub fn set_egress_pause(
        &mut self,
        now: Instant,
        port: usize,
        priority: u8,
        until: Instant,
    ) -> bool {
        let class = usize::from(priority) % CLASSES;
        let state = &mut self.ports[port];
        state.class[class].paused_until = until;
        if until > now {
            state.stats.pauses_received += 1;
        }
        until > now
    }

    /// The next PFC frame that has reached the host on `port` by `now`.
    pub fn pause_frame(&mut self, now: Instant, port: usize) -> Option<PauseFrame> {
        let pauses = &mut self.ports[port].pauses;
        if pauses.front().is_some_and(|p| p.at <= now) {
            pauses.pop_front()
        } else {
            None
        }
    }

    /// Whether `port`'s egress holds packets of `priority` that the node at its other end has
    /// paused at `now`: a queue that waits on its peer (PFC deadlock detection).
    pub fn egress_blocked(&self, now: Instant, port: usize, priority: u8) -> bool {
        let class = usize::from(priority) % CLASSES;
        let p = &self.ports[port];
        !p.class[class].queue.is_empty() && p.class[class].paused_until > now
    }

    /// The egress ports whose queues of `priority` hold packets that came in on `ingress`: the
    /// queues the bytes `ingress` is charged with (and paused for) wait in.
    pub fn egress_holding(&self, ingress: usize, priority: u8) -> impl Iterator<Item = usize> + '_ {
        let class = usize::from(priority) % CLASSES;
        self.ports
            .iter()
            .enumerate()
            .filter_map(move |(egress, p)| {
                p.class[class]
                    .queue
                    .iter()
                    .any(|q| q.ingress() == ingress)
                    .then_some(egress)
            })
    }

    /// Checks the PFC state of ingress `port` for `priority` at `now`: a PAUSE whose time is
    /// half gone is sent again while the ingress still holds too much, as a switch refreshes
    /// XOFF on a timer (a paused ingress may see no packet of its own to check it by).
    pub fn check_pause(&mut self, now: Instant, port: usize, priority: u8) {
        let class = usize::from(priority) % CLASSES;
        // The check `advance` would make: done, for either kind of driver.
        self.ports[port].refresh_due &= !(1 << class);
        self.pfc_check(now, port, class);
    }

    /// Whether the switch has PFC frames to send out of `port` ([`SwitchOf::take_pause_frames`]).
    #[inline]
    pub fn has_pause_frames(&self, port: usize) -> bool {
        !self.ports[port].pauses.is_empty()
    }

    /// Every PFC frame the switch has sent out of `port` so far, oldest first, taken. Their
    /// `at` is when they left plus the config's `latency` (set it to zero to add each cable's
    /// own delay).
    pub fn take_pause_frames(&mut self, port: usize) -> impl Iterator<Item = PauseFrame> + '_ {
        self.ports[port].pauses.drain(..)
    }

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

/// The switch's generator (xorshift64) one step on: its next 64 random bits, for its marking
/// decisions and PINT's rounding.
#[inline]
pub(super) fn next_draw(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

/// RED marking of an ECN-capable packet by the queue `queue_bytes` of its class, at a port of
/// `rate_bps` (the thresholds scaled to it with [`SwitchConfig::ecn_rate_bps`]).
pub(super) fn mark<P: Frame>(
    config: &SwitchConfig,
    rng: &mut u64,
    packet: &mut P,
    (queue_bytes, rate_bps): (usize, u64),
    stats: &mut PortStats,
) {
    let Some(mut ecn) = config.ecn else { return };
    if let Some(reference) = config.ecn_rate_bps.filter(|&r| r != rate_bps && r > 0) {
        let scale = |k: usize| (k as u128 * u128::from(rate_bps) / u128::from(reference)) as usize;
        ecn.k_min_bytes = scale(ecn.k_min_bytes);
        ecn.k_max_bytes = scale(ecn.k_max_bytes);
    }
    if !matches!(packet.ecn(), Ecn::Ect0 | Ecn::Ect1) {
        return;
    }
    let draw = (next_draw(rng) >> 11) as f64 / (1u64 << 53) as f64;
    if draw < ecn.probability(queue_bytes) {
        packet.set_ecn(Ecn::Ce);
        stats.ce_marked += 1;
    }
}
