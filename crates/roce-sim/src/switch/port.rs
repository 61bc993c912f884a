//! A switch port and what it queues: the egress classes ([`Class`]), the packets waiting in
//! them ([`Queued`]), and the port's state laid out by use ([`Port`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use roce_core::Instant;

use super::{CLASSES, Frame, PauseFrame, PortStats};
use crate::serialisation::LastSerialised;

#[derive(Debug)]
pub(super) struct Queued<P> {
    pub(super) packet: P,
    /// Narrow, as the deep queues of a research-scale run hold millions of these.
    pub(super) ingress: u16,
    pub(super) priority: u8,
}

impl<P: Frame> Queued<P> {
    pub(super) fn ingress(&self) -> usize {
        usize::from(self.ingress)
    }
    pub(super) fn priority(&self) -> usize {
        usize::from(self.priority)
    }
    pub(super) fn bytes(&self) -> usize {
        self.packet.wire_len()
    }
}

/// What a port keeps per class (802.1p priority): its egress queue and, as an ingress, the
/// bytes it is charged with. One cache line, so that a hop reads one line of each of its two
/// ports' classes rather than one line of each per-class array.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct Class<P> {
    /// The egress queue.
    pub(super) queue: VecDeque<Queued<P>>,
    /// Bytes in `queue`.
    pub(super) bytes: usize,
    /// Until when the host has paused this egress class (PAUSE it sent).
    pub(super) paused_until: Instant,
    /// Ingress accounting: bytes held that came in on this port at this priority (PFC); with a
    /// shared buffer, those in its reserve and the shared pool.
    pub(super) held: usize,
    /// With a shared buffer: bytes held in this port's headroom at this priority.
    pub(super) headroom_held: usize,
}

// One line whatever a queue holds (a `VecDeque` is its pointer, capacity, head and length).
const _: () = assert!(size_of::<Class<()>>() == 64);

impl<P> Default for Class<P> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            bytes: 0,
            paused_until: Instant::ZERO,
            held: 0,
            headroom_held: 0,
        }
    }
}

/// A switch port. Laid out by use (`repr(C)`): what every departure reads first (one cache
/// line) and the ETS deficits (the next), then the counters, the ingress state, the classes
/// (a line each), and last what only the polled driver ([`super::SwitchOf::advance`]) and PAUSE
/// refreshes touch.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct Port<P> {
    /// Line rate, bits per second.
    pub(super) rate_bps: u64,
    /// For an event driver ([`super::SwitchOf::depart`]): when the packet that left last ends its
    /// serialisation, and the port may start the next.
    pub(super) busy_until: Instant,
    /// Bytes queued, all classes.
    pub(super) bytes: usize,
    /// What the port serialised last, remembered.
    pub(super) last_serialised: LastSerialised,
    pub(super) next_class: usize,
    /// Bit `c` set when class `c`'s queue holds a packet: the scheduler reads this, not the
    /// queues.
    pub(super) queued_classes: u16,
    /// Whether the class whose turn it is got its quantum this round.
    pub(super) granted: bool,
    /// `rate_bps`'s code in an INT record (`roce_wire::int::rate_code`), kept with it: a
    /// switch stamping HPCC's records would look it up for every packet.
    pub(super) int_rate: u8,
    pub(super) deficit: [i64; CLASSES],
    pub(super) stats: PortStats,
    /// With a shared buffer: the headroom, bytes (each PFC priority has this much).
    pub(super) headroom: usize,
    /// With a shared buffer: this port's threshold is the free space `>> alpha_shift`.
    pub(super) alpha_shift: u8,
    pub(super) paused_host: [bool; CLASSES],
    /// The priorities whose PAUSE a polled driver ([`super::SwitchOf::advance`]) has yet to check at
    /// its `refresh_at` (an event driver calls [`super::SwitchOf::check_pause`] itself).
    pub(super) refresh_due: u16,
    pub(super) pauses: VecDeque<PauseFrame>,
    pub(super) class: [Class<P>; CLASSES],
    /// When the last PAUSE sent to the host is due to be sent again, per priority
    /// ([`PauseFrame::refresh_at`]).
    pub(super) refresh_at: [Instant; CLASSES],
    pub(super) in_service: Option<(Instant, Queued<P>)>,
    /// Packets on the cable towards the host: (arrival, sequence).
    pub(super) cable: BinaryHeap<Reverse<(Instant, u64)>>,
    pub(super) cable_packets: Vec<(u64, P)>,
    /// HPCC-PINT: the port's utilisation meter, and the value it gave the last PINT packet it
    /// started.
    pub(super) pint: roce_wire::pint::Meter,
    pub(super) pint_value: u16,
}

// What a departure reads first fills the first line, the deficits the second.
const _: () = assert!(std::mem::offset_of!(Port<()>, deficit) == 64);

impl<P> Port<P> {
    /// Nanoseconds `bytes` take at the port's rate, rounded up.
    #[inline]
    pub(super) fn serialisation_nanos(&mut self, bytes: usize) -> u64 {
        self.last_serialised.nanos(bytes as u64, self.rate_bps)
    }

    /// Bytes held per priority (ingress accounting), for tests.
    #[cfg(test)]
    pub(super) fn held(&self) -> [usize; CLASSES] {
        std::array::from_fn(|c| self.class[c].held)
    }

    /// Bytes held in the headroom per priority, for tests.
    #[cfg(test)]
    pub(super) fn headroom_held(&self) -> [usize; CLASSES] {
        std::array::from_fn(|c| self.class[c].headroom_held)
    }

    pub(super) fn new(rate_bps: u64) -> Self {
        Self {
            rate_bps,
            busy_until: Instant::ZERO,
            bytes: 0,
            last_serialised: LastSerialised::default(),
            next_class: 0,
            queued_classes: 0,
            granted: false,
            int_rate: roce_wire::int::rate_code(rate_bps),
            deficit: [0; CLASSES],
            stats: PortStats::default(),
            headroom: 0,
            alpha_shift: 0,
            paused_host: [false; CLASSES],
            refresh_due: 0,
            pauses: VecDeque::new(),
            class: Default::default(),
            refresh_at: [Instant::ZERO; CLASSES],
            in_service: None,
            cable: BinaryHeap::new(),
            cable_packets: Vec::new(),
            pint: roce_wire::pint::Meter::default(),
            pint_value: 0,
        }
    }
}
