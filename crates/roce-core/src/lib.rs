//! The sans-IO RoCEv2 engine of roce-emu.
//!
//! A [`Nic`] is a deterministic function of its inputs and of `now`: it owns QPs, memory regions
//! and completion queues, consumes RoCEv2 UDP payloads and timer expiries, and produces UDP
//! payloads to send, deadlines and completions. It reads no clock, opens no socket, spawns no
//! thread and draws no random number; the same inputs at the same times give the same outputs,
//! which is what lets `roce-sim` run it in virtual time and `roce-device` run it on sockets.
//!
//! The API follows quinn-proto's taxonomy:
//!
//! - **A. getters**: `stats`, `qp_state`, …
//! - **B. inputs from the network and the clock**: `handle_datagram(now, datagram)` (or
//!   `handle_datagram_mut`, for a datagram in a buffer the NIC may rewrite),
//!   `handle_timeout(now)`. They return nothing: a datagram that is not accepted is dropped,
//!   counted under its own name in [`Stats`] and traced, never reported to the application.
//! - **C. verbs from the application**: `create_qp`, `modify_qp`, `post_send`, `post_recv`, …
//!   Misuse is a typed [`VerbsError`].
//! - **D. outputs, drained after every B or C call**: `poll_transmit(now, buf)` until `None`,
//!   then `poll_timeout()` (the next deadline to call `handle_timeout` at), and
//!   `poll_completion(cq)`, and `poll_event()` for asynchronous events ([`AsyncEvent`]).
//!
//! The IB communication manager ([`cm`]: `cm_listen`, `cm_connect`, `cm_accept`, …,
//! `poll_cm_event`) sets up RC connections over QP 1 as the kernel's ib_cm does.
//!
//! Shared receive queues ([`SrqHandle`], `create_srq`, `post_srq_recv`) let several QPs of a
//! protection domain take receive WRs from one queue (`srq.rs`).
//!
//! Congestion control ([`NicConfig`]'s `congestion`) runs on every QP of a NIC: none
//! (requests leave as fast as the window allows, the default), DCQCN ([`Congestion::Dcqcn`]: a
//! reaction point with its rate, α and timers, a notification point that sends CNPs, and a
//! pacer), DCTCP ([`Congestion::Dctcp`]: a rate and a window cut by α/2 once per window when
//! the ACKs echo CE marks in the BTH's BECN bit), TIMELY ([`Congestion::Timely`]: a rate set
//! from the RTT of the ACKs and its gradient) or HPCC ([`Congestion::Hpcc`]: a window and a
//! rate from the switches' in-band telemetry, an INT header after the BTH of requests that the
//! ACKs echo), each QP's state readable through [`Nic::qp_congestion`]. The four sit behind one
//! trait that gives a rate and/or a window and hears CNPs, bytes sent, timers and ACKs (bytes
//! newly acknowledged, an RTT sample, the ECN echo, the INT echo); docs/congestion.md has each
//! algorithm's rules, parameters and sources. Without DCTCP no packet carries BECN or FECN, and
//! without HPCC none carries INT, as rxe's.
//!
//! Where a rule comes from the IBTA specification or from the kernel's rxe driver (the reference
//! peer), the code that applies it cites it.

#![warn(missing_docs)]

use std::net::{IpAddr, SocketAddr};

pub use roce_wire::frame::Ecn;

mod cc;
mod cc_params;
pub mod cm;
pub mod config;
mod connect;
pub mod copy;
mod cq;
mod error;
mod event;
pub mod fuzzing;
pub mod gsi;
mod in_flight;
mod loan;
mod mr;
mod mw;
mod nic;
pub mod qp;
mod sgl;
pub mod share;
mod splitmix;
mod srq;
mod stats;
pub mod time;
mod timer;
mod wr;

pub use cc::CongestionState;
pub use cc_params::ParamError;
pub use cm::{
    AcceptParams, CmError, CmEvent, CmState, ConnId, ConnectParams, ConnectRequest, ListenHandle,
    RDMA_UDP_QKEY, SidrParams, SidrRequest,
};
pub use config::{
    Congestion, DcqcnConfig, DctcpConfig, HpccConfig, IcrcPolicy, LossRecovery, Mtu,
    NS3_BASE_RTT_NS, NicConfig, SrcPortPolicy, TimelyConfig,
};
pub use connect::Connect;
pub use cq::{CqHandle, Cqe, NetworkHdr, WcOpcode, WcStatus};
pub use error::VerbsError;
pub use event::AsyncEvent;
pub use loan::Loan;
pub use mr::{Access, MemoryRegion, OwnedMemory, PdHandle, RegionMemory};
pub use mw::{MwBind, MwType};
pub use nic::{MAX_DATAGRAM, Nic};
pub use qp::inline_data::InlineData;
pub use qp::{AddressVector, QpAttr, QpInit, QpState, QpType};
pub use roce_wire::{Psn, Qpn};
pub use sgl::Sgl;
pub use srq::{SrqAttr, SrqHandle, SrqInit, SrqModify};
pub use stats::Stats;
pub use time::{Duration, Instant};
pub use wr::{RecvWr, Remote, SendOp, SendWr, Sge, UdDest};

/// An incoming RoCEv2 UDP payload (BTH … ICRC) and what the network told us about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// The peer's IP address and UDP source port (the flow entropy, covered by the ICRC).
    pub src: SocketAddr,
    /// Our IP address and UDP port it was sent to (4791).
    pub dst: SocketAddr,
    /// The ECN bits of the IP header: CE marks feed the congestion notification point.
    pub ecn: Ecn,
    /// The IPv4 identification, when the backend sees it (raw sockets). `None` (UDP sockets)
    /// means the ICRC cannot be checked in full; the NIC's ICRC policy says what it does then.
    pub ip_id: Option<u16>,
    /// Its place in a receive-offload (GRO) batch, 0 when it came alone. With an unknown IPv4
    /// ID the ICRC is tried with this ID first: a sender that batched its packets with
    /// segmentation offload (our UDP backend, see [`Nic::poll_transmit_segment`]) gave segment
    /// `i` the ID `i`.
    pub segment: u16,
    /// The UDP payload.
    pub payload: &'a [u8],
}

impl<'a> Datagram<'a> {
    /// The same datagram with another payload.
    fn with_payload(self, payload: &'a [u8]) -> Self {
        Self { payload, ..self }
    }
}

/// An incoming datagram in a buffer the NIC may rewrite while it takes the datagram in
/// ([`Nic::handle_datagram_mut`]), as quinn-proto's `Endpoint::handle` takes its datagram as a
/// `BytesMut`: HPCC's INT header is then taken off in place (`roce_wire::int::strip_in_place`)
/// rather than by a copy of the datagram. The fields are [`Datagram`]'s.
#[derive(Debug, PartialEq, Eq)]
pub struct DatagramMut<'a> {
    /// [`Datagram::src`].
    pub src: SocketAddr,
    /// [`Datagram::dst`].
    pub dst: SocketAddr,
    /// [`Datagram::ecn`].
    pub ecn: Ecn,
    /// [`Datagram::ip_id`].
    pub ip_id: Option<u16>,
    /// [`Datagram::segment`].
    pub segment: u16,
    /// The UDP payload, which the NIC may overwrite.
    pub payload: &'a mut [u8],
}

impl DatagramMut<'_> {
    /// The datagram, read-only.
    #[inline]
    pub fn as_datagram(&self) -> Datagram<'_> {
        Datagram {
            src: self.src,
            dst: self.dst,
            ecn: self.ecn,
            ip_id: self.ip_id,
            segment: self.segment,
            payload: self.payload,
        }
    }
}

/// A datagram to send: `poll_transmit` wrote its UDP payload into the caller's buffer, and this
/// says where it goes and with which IP header fields (quinn's `Transmit`). The ICRC in the
/// payload was computed for exactly these fields, an IPv4 identification of 0 and DF set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct Transmit {
    /// Our IP address to send from (the QP's source GID).
    pub src: IpAddr,
    /// The UDP source port the ICRC covers.
    pub src_port: u16,
    /// The destination address and port (4791).
    pub dst: SocketAddr,
    /// The ECN bits to send with.
    pub ecn: Ecn,
    /// The DSCP to send with.
    pub dscp: u8,
    /// The TTL / hop limit to send with.
    pub ttl: u8,
    /// Bytes of UDP payload written to the buffer.
    pub len: usize,
}
