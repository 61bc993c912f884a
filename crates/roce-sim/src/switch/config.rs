//! What a switch is configured with, what it counts, and what it queues.

use roce_core::{Duration, Instant};
use roce_wire::ROCE_V2_UDP_PORT;
use roce_wire::frame::Ecn;
use roce_wire::int::{self, Hop};

use crate::{EcnMarking, SimPacket};

/// Priorities (traffic classes) per port.
pub const CLASSES: usize = 8;

/// When the congestion point decides to mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MarkAt {
    /// When a packet joins the queue, by the queue it finds.
    #[default]
    Enqueue,
    /// When a packet leaves the queue, by the queue it leaves behind ("Fast ECN"): the
    /// notification reaches the sender a queueing delay earlier.
    Dequeue,
}

/// PFC thresholds, per ingress port and priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pfc {
    /// Bytes held above which the port's host is paused.
    pub xoff_bytes: usize,
    /// Bytes held below which it is resumed.
    pub xon_bytes: usize,
    /// Pause time per PAUSE frame, in quanta of 512 bit times.
    pub pause_quanta: u16,
    /// Which priorities PFC applies to (bit i = priority i); RoCE usually uses one (3).
    pub priorities: u8,
}

/// One buffer shared by all of a switch's ports, with dynamic PFC thresholds: Broadcom's
/// shared-buffer MMU as HPCC's ns-3 models it (`switch-mmu.cc`; headroom and α per port set by
/// `third.cc`). With it a switch has no per-egress limit and `Pfc`'s `xoff_bytes` and
/// `xon_bytes` are unused: each ingress port and priority owns `reserve_bytes`, then takes from
/// the shared pool until its share passes the *threshold* `free >> alpha_shift` of its port,
/// where `free` is what neither the reserves, the headrooms nor the shared bytes in use hold.
/// There it pauses its sender (XOFF), and what still arrives goes to the port's headroom
/// ([`SwitchOf::set_port_headroom`](super::SwitchOf::set_port_headroom)); it resumes (XON)
/// once its headroom is empty and its share is `resume_offset_bytes` under the threshold. A
/// packet that finds the headroom full is dropped, and so is one of a priority without PFC
/// that would need it. A busy switch has less free space, so every port's threshold falls:
/// the more ports share the buffer, the earlier each pauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedBuffer {
    /// The switch's whole buffer, bytes.
    pub bytes: usize,
    /// Bytes each ingress port and priority holds before it takes from the shared pool
    /// (HPCC: 4 KiB).
    pub reserve_bytes: usize,
    /// How far under the threshold a paused port's share must fall before it resumes (HPCC:
    /// 3 KiB).
    pub resume_offset_bytes: usize,
    /// The threshold is the free space shifted right by this much (α = 2^-shift) on a port of
    /// the slowest rate; HPCC uses 3 (1/8) and one less per doubling of a port's rate over the
    /// hosts' (`set_port_headroom` takes each port's own).
    pub alpha_shift: u8,
}

impl SharedBuffer {
    /// `bytes` shared, with HPCC's reserve (4 KiB), resume offset (3 KiB) and α (1/8).
    pub fn hpcc(bytes: usize) -> Self {
        Self {
            bytes,
            reserve_bytes: 4 * 1024,
            resume_offset_bytes: 3 * 1024,
            alpha_shift: 3,
        }
    }
}

/// ETS: which classes are strict priority, and the weights of the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ets {
    /// Strict priority classes, served before any weighted one, higher priority first.
    pub strict: [bool; CLASSES],
    /// Weights of the other classes (deficit round robin); 0 counts as 1.
    pub weights: [u32; CLASSES],
}

impl Default for Ets {
    /// Every class weighted equally.
    fn default() -> Self {
        Self {
            strict: [false; CLASSES],
            weights: [1; CLASSES],
        }
    }
}

/// How a [`Switch`](super::Switch) behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchConfig {
    /// Line rate of every port, bits per second.
    pub bandwidth_bps: u64,
    /// Propagation delay of each cable, each way.
    pub latency: Duration,
    /// Bytes of buffer per egress port, all classes together (drop-tail); unused with
    /// `shared`.
    pub buffer_bytes: usize,
    /// One buffer shared by all ports, with dynamic PFC thresholds, instead of `buffer_bytes`
    /// per egress port and PFC's static ones; `None` (the default): per-port buffers.
    pub shared: Option<SharedBuffer>,
    /// RED ECN marking per egress class; `None` never marks.
    pub ecn: Option<EcnMarking>,
    /// The line rate `ecn`'s thresholds are for: a port of another rate marks at them scaled by
    /// its rate over this one (HPCC's ns-3 `KMIN_MAP`/`KMAX_MAP`: 4 × at 400 Gb/s beside
    /// 100 Gb/s hosts). `None` (the default): every port at `ecn`'s.
    pub ecn_rate_bps: Option<u64>,
    /// When marking is decided.
    pub mark_at: MarkAt,
    /// PFC; `None` (the default) is a lossy fabric, as on real switches until configured.
    pub pfc: Option<Pfc>,
    /// Egress scheduling.
    pub ets: Ets,
    /// DSCP → priority ("trust dscp"); the default is DSCP / 8 (so DSCP 26, RoCE's usual, is 3
    /// and CNPs' DSCP 48 is 6).
    pub dscp_to_priority: [u8; 64],
    /// HPCC-PINT's utilisation meter on every egress (`roce_wire::pint`); `None` (the
    /// default): no meter, and PINT headers leave as they came.
    pub pint: Option<PintMeter>,
}

/// What a switch's PINT meters need (ns-3's `SwitchNode` `MaxRtt` and `Pint::log_base`).
#[derive(Debug, Clone, PartialEq)]
pub struct PintMeter {
    /// T, ns: the EWMA's span and the BDP's RTT (ns-3: the fabric's largest base RTT, as the
    /// senders' T).
    pub rtt_ns: u64,
    /// The encoding at its log base, one table for every switch that clones the configuration.
    pub scale: std::sync::Arc<roce_wire::pint::Scale>,
}

impl PintMeter {
    /// Meters over T = `rtt_ns` encoding at log base `log_base` (above 1).
    pub fn new(rtt_ns: u64, log_base: f64) -> Self {
        Self {
            rtt_ns,
            scale: std::sync::Arc::new(roce_wire::pint::Scale::new(log_base)),
        }
    }

    /// The meters the NICs' congestion control asks for: HPCC-PINT's T and log base; `None`
    /// for anything else.
    pub fn for_congestion(congestion: &roce_core::Congestion) -> Option<Self> {
        match congestion {
            roce_core::Congestion::Hpcc(h) if h.pint => {
                Some(Self::new(u64::from(h.base_rtt_ns), h.pint_base()))
            }
            _ => None,
        }
    }
}

impl Default for SwitchConfig {
    fn default() -> Self {
        let mut map = [0; 64];
        for (dscp, prio) in map.iter_mut().enumerate() {
            *prio = (dscp / 8) as u8;
        }
        Self {
            bandwidth_bps: 10_000_000_000,
            latency: Duration::from_micros(1),
            buffer_bytes: 1 << 20,
            shared: None,
            ecn: None,
            ecn_rate_bps: None,
            mark_at: MarkAt::Enqueue,
            pfc: None,
            ets: Ets::default(),
            dscp_to_priority: map,
            pint: None,
        }
    }
}

/// What a switch needs to know of a packet it queues: its length on the wire, its DSCP
/// (classification) and its ECN bits (marking).
pub trait Frame {
    /// Bytes on the wire.
    fn wire_len(&self) -> usize;
    /// DSCP, 0..=63.
    fn dscp(&self) -> u8;
    /// The ECN bits.
    fn ecn(&self) -> Ecn;
    /// Sets the ECN bits (a CE mark).
    fn set_ecn(&mut self, ecn: Ecn);
    /// Whether the switch should append its INT record as the packet leaves (HPCC,
    /// `roce_wire::int::stampable`). Default: never.
    #[inline(always)]
    fn wants_int(&self) -> bool {
        false
    }
    /// Appends an egress's INT record; called only when [`Frame::wants_int`].
    fn push_int(&mut self, hop: Hop) {
        let _ = hop;
    }
    /// Whether it carries a PINT header a switch raises as it leaves (HPCC-PINT,
    /// `roce_wire::int::pint_stampable`). Default: never.
    #[inline(always)]
    fn wants_pint(&self) -> bool {
        false
    }
    /// Raises its PINT value to `value` if higher; called only when [`Frame::wants_pint`].
    /// Default: nothing (a packet kept elsewhere is raised there: see
    /// `SwitchOf::pint_value`).
    fn raise_pint(&mut self, value: u16) {
        let _ = value;
    }
}

impl Frame for SimPacket {
    fn wire_len(&self) -> usize {
        Self::wire_len(self)
    }
    fn dscp(&self) -> u8 {
        self.dscp
    }
    fn ecn(&self) -> Ecn {
        self.ecn
    }
    fn set_ecn(&mut self, ecn: Ecn) {
        self.ecn = ecn;
    }
    /// A RoCEv2 datagram (to port 4791) whose INT header may take a record.
    fn wants_int(&self) -> bool {
        self.dst.port() == ROCE_V2_UDP_PORT && int::stampable(&self.payload)
    }
    fn push_int(&mut self, hop: Hop) {
        int::stamp(&mut self.payload, hop);
    }
    /// A RoCEv2 datagram whose PINT header a switch may raise.
    fn wants_pint(&self) -> bool {
        self.dst.port() == ROCE_V2_UDP_PORT && int::pint_stampable(&self.payload)
    }
    fn raise_pint(&mut self, value: u16) {
        int::raise_pint(&mut self.payload, value);
    }
}

/// Counters of one port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets queued for this egress port.
    pub enqueued: u64,
    /// Packets sent out of it.
    pub sent: u64,
    /// Bytes (on the wire) sent out of it.
    pub sent_bytes: u64,
    /// Packets dropped: its buffer was full (with a shared buffer: packets that came in on
    /// this port and found its headroom full).
    pub drops: u64,
    /// Packets marked CE on it.
    pub ce_marked: u64,
    /// PAUSE frames (XOFF) sent to its host.
    pub pauses_sent: u64,
    /// Resume frames (XON) sent to its host.
    pub resumes_sent: u64,
    /// The largest occupancy its buffer reached, bytes.
    pub max_queue_bytes: usize,
    /// PAUSE frames (XOFF) its host sent, which stop this port's egress for a priority.
    pub pauses_received: u64,
}

/// A PFC frame on its way to a host, as its effect: the host may not send `priority` until
/// `until` (`until == at` for XON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseFrame {
    /// When it reaches the host.
    pub at: Instant,
    /// The priority it pauses.
    pub priority: u8,
    /// Until when (`at` itself for a resume).
    pub until: Instant,
}

impl PauseFrame {
    /// Halfway through the pause (rounded down): from then the switch sends it again while
    /// the ingress still holds too much ([`check_pause`](super::SwitchOf::check_pause)).
    /// Whoever drives the switch by events checks it then; the switch refreshes from the same
    /// instant, so an odd pause time cannot leave the check one nanosecond short of it.
    pub fn refresh_at(&self) -> Instant {
        self.at + (self.until - self.at) / 2
    }
}
