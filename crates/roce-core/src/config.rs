//! Configuration of the NIC, each knob with its default documented here (a QP's attributes
//! are the QP's: `qp/attr.rs`).

use std::net::IpAddr;

/// How the NIC checks the ICRC of what it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IcrcPolicy {
    /// Check it, and drop what fails under `rx_icrc_errors`. A datagram whose IPv4
    /// identification the backend could not see (UDP sockets) passes when some ID makes its
    /// ICRC verify: the ID is solved for (`roce_wire::icrc::ipv4_id`), and a corrupt packet
    /// passes one time in 2^16 (the raw backend sees the ID and checks in full). IDs other than
    /// the datagram's place in its receive batch and 0 count under `rx_icrc_id_solved`.
    #[default]
    Check,
    /// Do not check (paths that rewrite packets); every packet counts under `rx_icrc_skipped`.
    Skip,
    /// Neither compute it on transmit (the field keeps what the send buffer held) nor check it
    /// (as `Skip`): for a simulator whose packets carry no payload bytes (roce-sim's lengths
    /// mode), where an ICRC would cover bytes that are not there and cost a CRC per packet for
    /// nothing.
    Off,
}

impl IcrcPolicy {
    /// Whether packets sent are sealed with their ICRC (all but [`IcrcPolicy::Off`]).
    pub fn seals(self) -> bool {
        self != Self::Off
    }

    /// Whether packets received are checked ([`IcrcPolicy::Check`] alone).
    pub fn checks(self) -> bool {
        self == Self::Check
    }
}

/// The UDP source port of the NIC's packets; the ICRC covers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SrcPortPolicy {
    /// Per QP, from the QPN pair, as rxe does (`rdma_get_udp_sport`): needs a backend that can
    /// send from any source port (raw sockets, the simulator).
    #[default]
    PerQp,
    /// One port for everything: a backend with one UDP socket bound to it (4791).
    Fixed(u16),
}

/// The NIC's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicConfig {
    /// The NIC's IP addresses: its GID table (`::ffff:a.b.c.d` for IPv4). Datagrams to other
    /// addresses are dropped (rxe `rxe_match_dgid`).
    pub addrs: Vec<IpAddr>,
    /// The largest path MTU a QP may use (the port's active MTU): 1024 on a 1500-byte netdev,
    /// 4096 on a 9000-byte one, as rxe computes it. Default 4096.
    pub max_mtu: Mtu,
    /// ICRC checking on receive. Default: check.
    pub icrc: IcrcPolicy,
    /// UDP source ports. Default: per QP.
    pub src_port: SrcPortPolicy,
    /// The lowest QPN handed out (rxe starts at 16, after the special QPs). Default 0x11. The
    /// first QPN lies in the 4096 above it, drawn from `seed`.
    pub first_qpn: u32,
    /// This engine's share of a NIC that several processes use at once (`Some(slot)`), or the
    /// whole NIC (`None`, the default): its QPNs, memory keys, CM comm IDs and SIDR request IDs
    /// are then in the slot's range ([`crate::share`]).
    pub slot: Option<u8>,
    /// Seeds what a peer must not be able to predict: where QPNs start, the low byte of each
    /// memory key (rxe varies it too) and where region addresses start. A peer that can spoof
    /// its source address then needs far more than a PSN to write into memory. The engine stays
    /// a deterministic function of its inputs: one seed, one set of values. Default 0; the
    /// device draws it from the operating system.
    pub seed: u64,
    /// Most QPs at once. Default 0x10000 (rxe `RXE_MAX_QP`).
    pub max_qp: usize,
    /// Unacknowledged PSNs a requester may have in flight (rxe `RXE_MAX_UNACKED_PSNS`). Default 128.
    pub max_unacked_psns: u32,
    /// Unacknowledged request packets all RC QPs together may have in flight: past it a QP's
    /// next request waits for ACKs, whatever its own window says (see `in_flight.rs`). Default
    /// 1024 (4 MiB at MTU 4096): eight QPs with full windows.
    pub max_unacked_total: u32,
    /// Packets a QP may send in a row when its turn comes, before the next QP in line sends
    /// (while it has them and the budget allows). 1 (the default): the QPs take turns one
    /// packet each, as HPCC's ns-3 (`RdmaEgressQueue::GetNextQindex`) picks its QPs. More keeps
    /// a QP's packets together: the burst's last packet asks for an ACK, and a QP waiting for
    /// room in the budget of `max_unacked_total` is granted a burst of it (`in_flight.rs`), so
    /// many QPs writing are acknowledged once a burst rather than once a packet, and the NIC
    /// walks one QP's state for a burst. rxe's requester task runs up to `RXE_MAX_ITERATIONS`
    /// (1024, `rxe_param.h`) packets of one QP before another's task. The device's NICs use
    /// 16 (64 KiB at MTU 4096).
    pub tx_burst_packets: u32,
    /// A requester sets AckReq at least every this many packets within a message
    /// (rxe `RXE_MAX_PKT_PER_ACK`). Default 64.
    pub max_pkts_per_ack: u32,
    /// Longest message in bytes (rxe `RXE_MAX_MSG_SZ`, 8 MiB). Default 2^31, the RETH limit.
    pub max_msg_size: u32,
    /// Largest memory region in bytes that `reg_mr` allocates. Default 2^32 (4 GiB: the
    /// longest message twice over); larger requests are refused with a typed error instead of
    /// aborting the process when the allocation fails.
    pub max_mr_size: usize,
    /// Most bytes of inline data in one send work request (rxe 400). Default 400.
    pub max_inline: usize,
    /// Most SGEs in one work request (rxe 32). Default 32.
    pub max_sge: usize,
    /// Most shared receive queues at once. Default 0x10000, as many as `max_qp` (rxe 6.x
    /// allows more, `RXE_MAX_SRQ`; an SRQ nobody can use is of no help).
    pub max_srq: usize,
    /// Most receive WRs one SRQ holds (rxe `RXE_MAX_SRQ_WR`, `DEFAULT_MAX_VALUE` = 2^20 in
    /// Linux 6.x). Default 2^20. Memory grows with the WRs posted, not with this bound.
    pub max_srq_wr: usize,
    /// Most asynchronous events waiting for `Nic::poll_event`; more are lost and counted
    /// under `async_event_overflows` (the kernel's uverbs event queue is unbounded but
    /// per-file; a bound keeps a reader that never reads from growing the NIC). Default 1024.
    pub max_async_events: usize,
    /// Raise [`crate::AsyncEvent::QpFatal`] when the transport moves a QP to the error state
    /// by itself. rxe never raises `IBV_EVENT_QP_FATAL` (its `rxe_qp_error` raises no event),
    /// so the default is false, as rxe.
    pub qp_fatal_events: bool,
    /// The port's line rate in bits per second: where the congestion control's rate (DCQCN,
    /// DCTCP, TIMELY) starts and the most it climbs back to (mlx5 `rpg_max_rate` 0 = line
    /// rate); DCTCP's window is its `base_rtt_ns` at the rate. Used only with congestion
    /// control.
    /// Default 100 Gb/s.
    pub line_rate_bps: u64,
    /// Congestion control. Default: none.
    pub congestion: Congestion,
    /// How RC QPs recover lost packets: go-back-N (the default, what rxe and IBTA vol. 1
    /// §9.7.5.2.1 do) or IRN-style selective repeat (`qp/selective.rs`). Both ends of a
    /// connection must use the same.
    pub loss_recovery: LossRecovery,
    /// How long a REQ for a service ID nobody listens on is held for a listener to come
    /// before it is rejected INVALID_SERVICE_ID (ib_cm rejects it at once; why ours waits:
    /// `cm/parked.rs`). Zero rejects at once. Default 1 s, a quarter of a requester's CM
    /// response timeout (librdmacm's 4.3 s).
    pub cm_listen_grace: crate::Duration,
}

impl Default for NicConfig {
    fn default() -> Self {
        Self {
            addrs: Vec::new(),
            max_mtu: Mtu::Mtu4096,
            icrc: IcrcPolicy::Check,
            src_port: SrcPortPolicy::PerQp,
            first_qpn: 0x11,
            slot: None,
            seed: 0,
            max_qp: 0x1_0000,
            max_unacked_psns: 128,
            max_unacked_total: 1024,
            tx_burst_packets: 1,
            max_pkts_per_ack: 64,
            max_msg_size: 1 << 31,
            max_mr_size: 1 << 32,
            max_inline: 400,
            max_sge: 32,
            max_srq: 0x1_0000,
            max_srq_wr: 1 << 20,
            max_async_events: 1024,
            qp_fatal_events: false,
            line_rate_bps: 100_000_000_000,
            congestion: Congestion::None,
            loss_recovery: LossRecovery::GoBackN,
            cm_listen_grace: crate::Duration::from_secs(1),
        }
    }
}

/// Which congestion control the NIC runs on its QPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Congestion {
    /// None: requests leave as fast as the window allows, with ECN Not-ECT, and CNPs are only
    /// counted. The default, and what rxe does.
    #[default]
    None,
    /// DCQCN (Zhu et al., SIGCOMM 2015): each QP is a reaction point and a notification point.
    Dcqcn(DcqcnConfig),
    /// DCTCP (Alizadeh et al., SIGCOMM 2010) as HPCC's ns-3 runs it over RDMA: a rate and a
    /// window cut by α/2 at most once per window when ACKs echo CE marks (BECN), α the EWMA
    /// of the fraction of marked bytes.
    Dctcp(DctcpConfig),
    /// TIMELY (Mittal et al., SIGCOMM 2015): a rate driven by the RTT of each window, measured
    /// from a request's departure to the arrival of the ACK that covers it.
    Timely(TimelyConfig),
    /// HPCC (Li et al., SIGCOMM 2019): a window and a rate set each ACK from the in-band
    /// telemetry (INT) the switches stamped on the request and the responder echoed, as HPCC's
    /// ns-3 runs it (CC_MODE 3). Both ends must run it: the INT header is not IBTA's.
    Hpcc(HpccConfig),
}

impl Congestion {
    /// Requests carry ECT(0) so that a congestion point may mark them CE: the algorithm reads
    /// the marks (DCQCN through CNPs, DCTCP through the ACKs' BECN).
    pub const fn reacts_to_marks(&self) -> bool {
        matches!(self, Self::Dcqcn(_) | Self::Dctcp(_))
    }

    /// The responder echoes CE marks to the requester in the BTH's BECN bit of its ACKs
    /// (IBA vol. 1 Annex A10's FECN/BECN byte): DCTCP's ECN-Echo. Off for every other
    /// algorithm, so the wire stays as rxe writes it.
    pub const fn echoes_ecn(&self) -> bool {
        matches!(self, Self::Dctcp(_))
    }

    /// The requester records each request's departure to learn, from the ACKs, the bytes in
    /// flight, the bytes acknowledged and RTT samples: the algorithms driven by ACKs, and
    /// DCQCN with a window (`DcqcnConfig::window_rtt_ns`).
    pub const fn hears_acks(&self) -> bool {
        match self {
            Self::Dctcp(_) | Self::Timely(_) | Self::Hpcc(_) => true,
            Self::Dcqcn(d) => d.window_rtt_ns > 0,
            Self::None => false,
        }
    }

    /// The window bounds the payload bytes in flight, as ns-3's does, instead of the bytes on
    /// the wire: HPCC's `window_payload`.
    pub const fn window_counts_payload(&self) -> bool {
        matches!(self, Self::Hpcc(h) if h.window_payload)
    }

    /// Request packets carry an INT header after the BTH, which switches stamp and the
    /// responder echoes in its ACKs (`roce_wire::int`): HPCC's. Only between NICs that both run
    /// it; rxe would not parse it.
    pub const fn carries_int(&self) -> bool {
        matches!(self, Self::Hpcc(_))
    }
}

/// DCTCP's parameters (Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010), as HPCC's
/// ns-3 simulator runs it on RDMA NICs (`rdma-hw.cc` `HandleAckDctcp`, CC_MODE 8, with
/// `run.py --cc dctcp`): a rate that starts at line rate (no slow start), with a window of
/// `base_rtt_ns` at that rate (ns-3 `HAS_WIN 1`, `VAR_WIN 1`), cut by α/2 on an ACK with
/// ECN-Echo at most once per window, α updated once per window, one additive step per window
/// without a cut. [`Default`] is ns-3's `run.py` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DctcpConfig {
    /// α's gain g = 1/2^`shift_g` (Linux `tcp_dctcp`'s `dctcp_shift_g`): α ← (1−g)·α + g·F
    /// once per window, F the fraction of the window's bytes acknowledged with ECN-Echo.
    /// Default 4: the paper's g = 1/16 (ns-3 `EWMA_GAIN 0.0625` for dctcp).
    pub shift_g: u32,
    /// α before the first window, in 1/1024 (1024 = 1). Default 1024: ns-3's `m_alpha` starts
    /// at 1 (Linux's `dctcp_alpha_on_init` is also 1024).
    pub initial_alpha: u32,
    /// The additive step, Mb/s, once per window without a cut. Default 615: ns-3 `run.py`'s
    /// `DCTCP_RATE_AI`, one 1 KB packet per 13 µs RTT (DCTCP's one segment per RTT).
    pub rate_ai: u32,
    /// The rate never goes below this, Mb/s. Default 1000 (ns-3 `MIN_RATE`).
    pub min_rate: u32,
    /// The window at line rate is this RTT's worth of bytes, and at a lower rate in proportion
    /// (ns-3's `VAR_WIN`: the BDP window × rate / line rate), ns; 0: no window, a rate alone.
    /// Default 13 000, the 13 µs RTT `rate_ai` is computed from (ns-3 takes the topology's
    /// largest base RTT).
    pub base_rtt_ns: u32,
}

/// The base RTT, ns, that the windows and rates of the algorithms as HPCC's ns-3 runs them are
/// computed for by default: 13 µs, HPCC's T on its fat tree (`run.py`'s `10·bw/25` and DCTCP's
/// one 1 KB packet per RTT assume it). The default `base_rtt_ns` of [`DctcpConfig`] and
/// [`HpccConfig`], and the simulator's window of `dcqcn-vwin` and `timely-vwin`.
pub const NS3_BASE_RTT_NS: u32 = 13_000;

impl Default for DctcpConfig {
    fn default() -> Self {
        Self {
            shift_g: 4,
            initial_alpha: 1024,
            rate_ai: 615,
            min_rate: 1000,
            base_rtt_ns: NS3_BASE_RTT_NS,
        }
    }
}

/// TIMELY's parameters (Mittal et al., "TIMELY: RTT-based Congestion Control for the
/// Datacenter", SIGCOMM 2015), as HPCC's ns-3 simulator runs it (`rdma-hw.cc`
/// `UpdateRateTimely`, CC_MODE 7, with `run.py --cc timely`): one rate update per window of
/// ACKs from the RTT and its gradient. [`Default`] is ns-3's values at 10 Gb/s: the
/// `TimelyAlpha`, `TimelyBeta`, `TimelyTLow`, `TimelyTHigh`, `TimelyMinRtt` attribute defaults
/// of `rdma-hw.cc` and `run.py`'s steps, which scale with the link rate (`RATE_AI` =
/// bw/10·10 Mb/s, `RATE_HAI` = bw/10·50 Mb/s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimelyConfig {
    /// T_low, ns: below it the rate increases additively whatever the gradient. Default 50 000.
    pub t_low_ns: u32,
    /// T_high, ns: above it the rate decreases by β·(1 − T_high/RTT). Default 500 000.
    pub t_high_ns: u32,
    /// The minimum RTT that normalises the gradient (the paper's `minRTT`), ns. Default
    /// 20 000.
    pub min_rtt_ns: u32,
    /// The EWMA weight α of a new RTT difference, in 1/1000: rtt_diff ← (1−α)·rtt_diff +
    /// α·new_rtt_diff. Default 875 (0.875).
    pub alpha: u32,
    /// The multiplicative-decrease factor β, in 1/1000. Default 800 (0.8).
    pub beta: u32,
    /// The additive step δ, Mb/s. Default 10.
    pub rate_ai: u32,
    /// The hyper-active step, Mb/s, taken once `hai_thresh` increases came in a row. Default
    /// 50 (the paper's N·δ with N = 5).
    pub rate_hai: u32,
    /// Increases in a row after which each increase is `rate_hai` (the paper's N; ns-3's
    /// `m_incStage < 5`). Default 5.
    pub hai_thresh: u32,
    /// The rate never goes below this, Mb/s. Default 1000 (ns-3 `MIN_RATE`).
    pub min_rate: u32,
    /// A window that follows the rate, as DCTCP's `base_rtt_ns`: at most the rate × this
    /// many ns of bytes on the wire unacknowledged (ns-3's `HAS_WIN 1`, `VAR_WIN 1`: `run.py
    /// --cc timely_vwin`, where it is the topology's largest RTT), and every request asks for
    /// an ACK. Default 0: no window, as TIMELY's paper and `run.py --cc timely`.
    pub window_rtt_ns: u32,
}

impl Default for TimelyConfig {
    fn default() -> Self {
        Self {
            t_low_ns: 50_000,
            t_high_ns: 500_000,
            min_rtt_ns: 20_000,
            alpha: 875,
            beta: 800,
            rate_ai: 10,
            rate_hai: 50,
            hai_thresh: 5,
            min_rate: 1000,
            window_rtt_ns: 0,
        }
    }
}

/// How an RC QP recovers lost packets. Both ends of a connection must use the same: the
/// NACKs of selective repeat carry, in the AETH's MSN field, a PSN (`qp/selective.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LossRecovery {
    /// Go-back-N (IBTA vol. 1 §9.7.5.2.1, rxe): the responder drops what arrives out of
    /// sequence after one NAK, the requester sends everything again from the PSN it names.
    /// The default.
    #[default]
    GoBackN,
    /// Selective repeat as IRN does it (Mittal et al., "Revisiting Network Support for RDMA",
    /// SIGCOMM 2018): the responder keeps what arrives out of sequence and NACKs each such
    /// packet with ePSN and its own PSN, the requester sends again only what is missing.
    SelectiveRepeat {
        /// IRN's BDP-FC: PSNs a requester may have unacknowledged, replacing
        /// `NicConfig::max_unacked_psns`; a responder keeps requests up to twice this past
        /// ePSN. One bandwidth-delay product of packets (IRN: BDP / MTU).
        bdp_packets: u32,
        /// IRN's RTO_low: the retransmit timeout while at most 3 packets (IRN's N) are
        /// unacknowledged, if shorter than the local ACK timeout; zero turns it off.
        rto_low: crate::Duration,
    },
}

impl LossRecovery {
    /// Selective repeat with a cap of `bdp_packets` in flight and IRN's RTO_low of 100 µs.
    pub const fn selective_repeat(bdp_packets: u32) -> Self {
        Self::SelectiveRepeat {
            bdp_packets,
            rto_low: crate::Duration::from_micros(100),
        }
    }

    /// Whether this is selective repeat.
    pub const fn is_selective(self) -> bool {
        matches!(self, Self::SelectiveRepeat { .. })
    }
}

/// HPCC's parameters (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019,
/// Algorithm 1), as HPCC's ns-3 simulator runs it (`rdma-hw.cc` `UpdateRateHp`, CC_MODE 3, with
/// `run.py --cc hp`: `HAS_WIN 1`, `VAR_WIN 1`, `FAST_REACT 1`, `MULTI_RATE 0`,
/// `SAMPLE_FEEDBACK 0`). [`Default`] is ns-3's values at 100 Gb/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HpccConfig {
    /// The target utilisation η, in 1/1000. Default 950 (the paper's and `run.py`'s
    /// `--utgt 95`); the HPCC project later recommends 990.
    pub eta: u32,
    /// maxStage: additive-increase stages before a multiplicative step (ns-3 `MI_THRESH`).
    /// Default 0, ns-3's for simulation ("The maxStage=5 in the paper is due to a typo for the
    /// simulation"): every update is W = W_c/(U/η) + W_AI.
    pub max_stage: u32,
    /// W_AI as a rate, Mb/s: the window grows by `rate_ai` × T each step. Default 40 (ns-3
    /// `run.py`'s `10·bw/25` at 100 Gb/s).
    pub rate_ai: u32,
    /// The rate never goes below this, Mb/s. Default 1000 (ns-3 `MIN_RATE`).
    pub min_rate: u32,
    /// T, the base RTT, ns: the window at line rate is T's worth of bytes (ns-3's BDP window)
    /// and the rate is W/T. Default 13 000.
    pub base_rtt_ns: u32,
    /// Per-ACK reaction between the once-per-RTT updates of W_c (ns-3 `FAST_REACT`). Default
    /// true.
    pub fast_react: bool,
    /// HPCC-PINT (ns-3's CC_MODE 10): requests carry PINT's 4-byte header instead of INT's 44
    /// bytes, in which each switch egress leaves the path's largest utilisation
    /// (`roce_wire::pint`), and U is that value as echoed, with no EWMA at the sender (ns-3
    /// `UpdateRateHpPint`). Default false.
    pub pint: bool,
    /// PINT's log base, in 1/1000: the value is log_base(⌈U·512⌉). Default 1010 (run.py's
    /// `--pint_log_base 1.01`); at least 1001.
    pub pint_log_base: u32,
    /// PINT's sampling, in 1/1000: the share of echoes the sender uses, each drawn at random
    /// (ns-3's `PINT_PROB`, which `HandleAckHpPint` applies before anything else, the first
    /// ACK's RTT included). Default 1000, every echo (run.py's `--pint_prob 1.0`).
    pub pint_prob: u32,
    /// The window bounds the payload bytes in flight, as ns-3's does (`GetOnTheFly`:
    /// `snd_nxt − snd_una`, in payload bytes; the window `m_win` is the BDP in bytes), instead
    /// of the bytes on the wire (headers, INT and all). With 1 000-byte payloads and INT's 44
    /// bytes a packet carries about 10 % more on the wire than its payload, so the wire's count
    /// lets that much less into the network. Default false (the wire's count: what a NIC's
    /// window over its own transmissions is).
    pub window_payload: bool,
}

impl HpccConfig {
    /// PINT's log base (`pint_log_base` / 1000, at least 1.001).
    pub fn pint_base(&self) -> f64 {
        f64::from(self.pint_log_base.max(1001)) / 1000.0
    }
}

impl Default for HpccConfig {
    fn default() -> Self {
        Self {
            eta: 950,
            max_stage: 0,
            rate_ai: 40,
            min_rate: 1000,
            base_rtt_ns: NS3_BASE_RTT_NS,
            fast_react: true,
            pint: false,
            pint_log_base: 1010,
            pint_prob: 1000,
            window_payload: false,
        }
    }
}

/// DCQCN's parameters, named and in the units of the mlx5 firmware knobs
/// (`/sys/class/net/<if>/ecn/roce_rp/*`, `roce_np/*`; `mlx5_ifc.h cong_control_r_roce_ecn_rp_bits`).
/// [`Default`] is NVIDIA's ConnectX-4+ defaults, [`DcqcnConfig::paper`] the paper's values
/// (Zhu et al., SIGCOMM 2015, and NVIDIA's mlx5 documentation of the knobs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DcqcnConfig {
    /// Rate-increase timer period, µs (the paper's T). NVIDIA 300.
    pub rpg_time_reset: u32,
    /// Byte-counter period, bytes sent between rate-increase events (the paper's B). NVIDIA
    /// 32767 (the firmware's unit is not documented; taken as bytes).
    pub rpg_byte_reset: u32,
    /// Fast-recovery steps before additive increase (the paper's F). NVIDIA 1.
    pub rpg_threshold: u32,
    /// The increase stage counts timer events alone, as HPCC's ns-3 does (`RateIncEventMlx`,
    /// which has no byte counter): F events of fast recovery, one additive increase, then a
    /// hyper increase of R_HAI at each event. `false`: the paper's stages, from both counters
    /// (hyper increase by i·R_HAI once both pass F). Default false.
    pub stages_by_timer: bool,
    /// Additive-increase step, Mb/s (R_AI). NVIDIA 5.
    pub rpg_ai_rate: u32,
    /// Hyper-increase step, Mb/s (R_HAI). NVIDIA 50.
    pub rpg_hai_rate: u32,
    /// Decrease-factor divisor: a decrease multiplies the rate by `1 − α·1024 / 2^rpg_gd`
    /// (α in 10-bit fixed point in the firmware), so 11 is the paper's `1 − α/2`. NVIDIA 11.
    pub rpg_gd: u32,
    /// A decrease leaves at least this percentage of the rate it started from. NVIDIA 50.
    pub rpg_min_dec_fac: u32,
    /// The rate never goes below this, Mb/s. NVIDIA 1.
    pub rpg_min_rate: u32,
    /// α's gain as `g = (1024 − dce_tcp_g) / 1024`: α ← (1−g)·α (+ g on a CNP). NVIDIA 1019
    /// (g ≈ 1/205); 1020 is the paper's 1/256.
    pub dce_tcp_g: u32,
    /// α-update period, µs (the paper's K): α decays once per period without a CNP. NVIDIA 1.
    pub dce_tcp_rtt: u32,
    /// α rises at each CNP that decreases the rate, as the paper writes it (α = (1 − g)·α + g
    /// with the decrease). `false`: once per `dce_tcp_rtt`, α = (1 − g)·α + g if a CNP
    /// arrived in that period — any CNP, one inside `rate_reduce_monitor_period` too — and
    /// (1 − g)·α if none did, as NVIDIA documents `dce_tcp_rtt` ("updated once every period,
    /// regardless of the reception of a CNP") and HPCC's ns-3 runs it (`UpdateAlphaMlx`).
    /// NVIDIA false.
    pub alpha_on_cnp: bool,
    /// α before the first CNP, in 1/1024 (1023 ≈ 1.0; 1024 is exactly 1). NVIDIA 1023.
    pub initial_alpha_value: u32,
    /// On every decrease, the target rate is set to the current rate (the paper's `RT = RC`).
    /// NVIDIA false.
    pub clamp_tgt_rate: bool,
    /// On a decrease after a timer-driven increase, the target rate is set to the current
    /// rate. NVIDIA true.
    pub clamp_tgt_rate_after_time_inc: bool,
    /// Rate set by the first CNP a QP at line rate receives, Mb/s; 0 applies the ordinary
    /// decrease. NVIDIA 0.
    pub rate_to_set_on_first_cnp: u32,
    /// At most one rate decrease per this many µs; CNPs in between change nothing. NVIDIA 4;
    /// the paper decreases on every CNP (0).
    pub rate_reduce_monitor_period: u32,
    /// The rate decreases at the end of a `rate_reduce_monitor_period` tick in which a CNP
    /// arrived, not at the CNP: the ticks run from the QP's first CNP (plus 1 ns, after α's
    /// step of the same instant), and the first CNP itself cuts nothing until its tick (HPCC's
    /// ns-3: `cnp_received_mlx` sets a flag that `CheckRateDecreaseMlx` reads every
    /// `RateDecreaseInterval`, `RateOnFirstCnp` 1.0). A period of 0 cuts at the CNP. `false`:
    /// a CNP cuts at once, at most once per period, as NVIDIA documents the knob. Default
    /// false.
    pub decrease_on_tick: bool,
    /// Notification point: at most one CNP per QP per this many µs; CE marks in between send
    /// nothing. NVIDIA 4 (firmware-dependent; the paper's N is 50).
    pub min_time_between_cnps: u32,
    /// A window that follows the rate, as DCTCP's `base_rtt_ns`: at most RC × this many ns of
    /// bytes on the wire unacknowledged (ns-3's `HAS_WIN 1`, `VAR_WIN 1`: `run.py --cc
    /// dcqcn_vwin`, where it is the topology's largest RTT), and every request asks for an
    /// ACK. 0: no window, as NVIDIA's NICs and `run.py --cc dcqcn`. Default 0.
    pub window_rtt_ns: u32,
    /// DSCP of the CNPs the notification point sends. NVIDIA 48.
    pub cnp_dscp: u8,
    /// 802.1p priority of CNPs. NVIDIA 6. Carried for an L2 backend; a `Transmit` has no VLAN
    /// tag, so the engine itself does not use it.
    pub cnp_802p_prio: u8,
}

impl Default for DcqcnConfig {
    /// NVIDIA's ConnectX-4+ firmware defaults (NVIDIA's documented defaults; mlxconfig on
    /// CX-5 fw 16.27 and the NVIDIA DOCA "DCQCN parameters" page).
    fn default() -> Self {
        Self {
            rpg_time_reset: 300,
            rpg_byte_reset: 32767,
            rpg_threshold: 1,
            stages_by_timer: false,
            rpg_ai_rate: 5,
            rpg_hai_rate: 50,
            rpg_gd: 11,
            rpg_min_dec_fac: 50,
            rpg_min_rate: 1,
            dce_tcp_g: 1019,
            dce_tcp_rtt: 1,
            alpha_on_cnp: false,
            initial_alpha_value: 1023,
            clamp_tgt_rate: false,
            clamp_tgt_rate_after_time_inc: true,
            rate_to_set_on_first_cnp: 0,
            rate_reduce_monitor_period: 4,
            decrease_on_tick: false,
            min_time_between_cnps: 4,
            window_rtt_ns: 0,
            cnp_dscp: 48,
            cnp_802p_prio: 6,
        }
    }
}

impl DcqcnConfig {
    /// The paper's values (Zhu et al., SIGCOMM 2015, as htsim `dcqcn.cpp` and the
    /// DCQCN-validation README give them; the paper's Table 1): g = 1/256,
    /// K = 55 µs, timer 55 µs, B = 10 MB, F = 5, R_AI = 40 Mb/s, N = 50 µs, α starts at 1,
    /// `RT = RC` on every decrease, one decrease per CNP. R_HAI (not in the paper's table) is
    /// 200 Mb/s, beside R_AI 40 in the sample `mix/config.txt` of `bobzhuyb/ns3-rdma`, the
    /// paper author's simulator.
    pub const fn paper() -> Self {
        Self {
            rpg_time_reset: 55,
            rpg_byte_reset: 10_000_000,
            rpg_threshold: 5,
            stages_by_timer: false,
            rpg_ai_rate: 40,
            rpg_hai_rate: 200,
            rpg_gd: 11,
            rpg_min_dec_fac: 50,
            rpg_min_rate: 1,
            dce_tcp_g: 1020,
            dce_tcp_rtt: 55,
            alpha_on_cnp: true,
            initial_alpha_value: 1024,
            clamp_tgt_rate: true,
            clamp_tgt_rate_after_time_inc: true,
            rate_to_set_on_first_cnp: 0,
            rate_reduce_monitor_period: 0,
            decrease_on_tick: false,
            min_time_between_cnps: 50,
            window_rtt_ns: 0,
            cnp_dscp: 48,
            cnp_802p_prio: 6,
        }
    }
}

/// An InfiniBand path MTU (`ibv_mtu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mtu {
    /// 256 bytes (`IBV_MTU_256` = 1).
    Mtu256,
    /// 512 bytes (2).
    Mtu512,
    /// 1024 bytes (3).
    Mtu1024,
    /// 2048 bytes (4).
    Mtu2048,
    /// 4096 bytes (5).
    Mtu4096,
}

impl Mtu {
    /// Payload bytes per packet.
    pub const fn bytes(self) -> u32 {
        match self {
            Self::Mtu256 => 256,
            Self::Mtu512 => 512,
            Self::Mtu1024 => 1024,
            Self::Mtu2048 => 2048,
            Self::Mtu4096 => 4096,
        }
    }

    /// The verbs enum value, 1..=5, as ibv_rc_pingpong and perftest exchange it.
    pub const fn enum_value(self) -> u8 {
        match self {
            Self::Mtu256 => 1,
            Self::Mtu512 => 2,
            Self::Mtu1024 => 3,
            Self::Mtu2048 => 4,
            Self::Mtu4096 => 5,
        }
    }

    /// From a byte count (256, 512, …, 4096).
    pub const fn from_bytes(bytes: u32) -> Option<Self> {
        match bytes {
            256 => Some(Self::Mtu256),
            512 => Some(Self::Mtu512),
            1024 => Some(Self::Mtu1024),
            2048 => Some(Self::Mtu2048),
            4096 => Some(Self::Mtu4096),
            _ => None,
        }
    }
}
