//! The MADs the CM sends, formatted as ib_cm formats them (`cm_format_req`, `cm_format_rep`,
//! …), and the way out through QP 1.

use std::net::IpAddr;

use roce_wire::mad::cm::{CmMad, Message};
use roce_wire::mad::rej::RejectReason;
use roce_wire::mad::{MAD_LEN, cma, drep, dreq, mra, rej, rep, req, rtu};
use roce_wire::{Gid, Qpn};

use super::Conn;
use super::retry::{CA_ACK_DELAY, MRA_SERVICE_TIMEOUT, ack_timeout};
use crate::gsi::GsiDatagram;
use crate::{Nic, NicConfig};

/// The high half of the TIDs of our requests (ib_cm's MAD agent `hi_tid`).
const HI_TID: u64 = 1;

/// The vendor ID of our REQ and REP: none.
const VENDOR_ID: u32 = 0;

/// The Local CA GUID of a NIC: the locally administered prefix 02:00:5e:00 and the low 32
/// bits of its first address, so that NICs of one fabric differ (ib_cm keys duplicate and
/// stale connections by the peer's CA GUID).
pub(crate) fn ca_guid(config: &NicConfig) -> u64 {
    let low = match config.addrs.first() {
        Some(IpAddr::V4(v4)) => u64::from(u32::from(*v4)),
        Some(IpAddr::V6(v6)) => (u128::from(*v6) as u64) & 0xffff_ffff,
        None => 0,
    };
    0x0200_5e00_0000_0000 | low
}

/// A TID of ours: `hi_tid` and the local comm ID (`cm_form_tid`).
//= rxe:cm.c/cm_form_tid
//# a request's TID is the MAD agent's high TID and the local comm ID
pub(crate) fn form_tid(local_id: u32) -> u64 {
    (HI_TID << 32) | u64::from(local_id)
}

/// `data` in a zeroed field of `N` bytes (callers checked the length).
fn padded<const N: usize>(data: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    let len = data.len().min(N);
    out[..len].copy_from_slice(&data[..len]);
    out
}

/// The 256 bytes of a message.
pub(crate) fn bytes(tid: u64, message: Message) -> [u8; MAD_LEN] {
    let mut out = [0; MAD_LEN];
    // The buffer is exactly MAD_LEN long: emit cannot fail.
    if CmMad::new(tid, message).emit(&mut out).is_err() {
        tracing::error!("a CM MAD did not fit 256 bytes");
    }
    out
}

/// Our REQ for `conn`, with its whole private data (the `cma_hdr` included).
//= rxe:cm.c/cm_format_req
//# RoCE REQ: permissive LIDs, the GIDs of both ends, our QPN and starting PSN, the path MTU,
//# retry counts, both response timeouts, the ACK timeout from the packet life time
pub(crate) fn req(conn: &Conn, guid: u64, response_timeout: u8, private: &[u8]) -> [u8; MAD_LEN] {
    let path = req::Path {
        local_lid: 0xffff,
        remote_lid: 0xffff,
        local_gid: Gid::from_ip(conn.local),
        remote_gid: Gid::from_ip(conn.peer),
        flow_label: 0,
        packet_rate: 0,
        traffic_class: 0,
        hop_limit: 64,
        sl: 0,
        subnet_local: false,
        local_ack_timeout: ack_timeout(CA_ACK_DELAY, conn.packet_life_time),
    };
    let repr = req::Repr {
        local_comm_id: conn.id.0,
        vendor_id: VENDOR_ID,
        service_id: conn.service_id,
        local_ca_guid: guid,
        local_qkey: 0,
        local_qpn: conn.qpn.unwrap_or(Qpn::new(0)),
        responder_resources: conn.responder_resources,
        local_eecn: 0,
        initiator_depth: conn.initiator_depth,
        remote_eecn: 0,
        remote_cm_response_timeout: response_timeout,
        transport_service_type: req::TRANSPORT_RC,
        end_to_end_flow_control: false,
        starting_psn: conn.psn,
        local_cm_response_timeout: response_timeout,
        retry_count: conn.retry_count,
        partition_key: roce_wire::mad::gsi::GSI_PKEY,
        path_mtu: conn.mtu.enum_value(),
        rdc_exists: false,
        rnr_retry_count: conn.rnr_retry_offered,
        max_cm_retries: conn.max_cm_retries,
        srq: conn.srq,
        extended_transport_type: 0,
        primary_path: path,
        alternate_path: req::Path::default(),
        sap_supported: false,
        private_data: padded(private),
    };
    bytes(conn.tid, Message::Req(repr))
}

/// Our REP for `conn`.
//= rxe:cm.c/cm_format_rep
//# the REP echoes the REQ's TID and carries our QPN, starting PSN, resources, ACK delay and RNR retry count
pub(crate) fn rep(conn: &Conn, guid: u64, private: &[u8]) -> [u8; MAD_LEN] {
    let repr = rep::Repr {
        local_comm_id: conn.id.0,
        remote_comm_id: conn.remote_id,
        local_qkey: 0,
        local_qpn: conn.qpn.unwrap_or(Qpn::new(0)),
        local_eecn: 0,
        starting_psn: conn.psn,
        vendor_id: VENDOR_ID,
        responder_resources: conn.responder_resources,
        initiator_depth: conn.initiator_depth,
        target_ack_delay: CA_ACK_DELAY,
        failover_accepted: 0,
        end_to_end_flow_control: false,
        rnr_retry_count: conn.rnr_retry_offered,
        srq: conn.srq,
        local_ca_guid: guid,
        private_data: padded(private),
    };
    bytes(conn.tid, Message::Rep(repr))
}

/// Our RTU for `conn`.
pub(crate) fn rtu(conn: &Conn) -> [u8; MAD_LEN] {
    let repr = rtu::Repr {
        local_comm_id: conn.id.0,
        remote_comm_id: conn.remote_id,
        private_data: [0; rtu::PRIVATE_DATA_LEN],
    };
    bytes(conn.tid, Message::Rtu(repr))
}

/// rdma_cm's MRA for a REQ its consumer still holds.
pub(crate) fn mra(conn: &Conn) -> [u8; MAD_LEN] {
    let repr = mra::Repr {
        local_comm_id: conn.id.0,
        remote_comm_id: conn.remote_id,
        message_mraed: mra::MRAED_REQ,
        service_timeout: MRA_SERVICE_TIMEOUT,
        private_data: [0; mra::PRIVATE_DATA_LEN],
    };
    bytes(conn.tid, Message::Mra(repr))
}

/// A REJ from `local_id` (0 when no connection of ours stands behind it) to the peer's
/// `remote_id`, of the message `rejected`.
pub(crate) fn rej(
    ids: (u32, u32),
    tid: u64,
    rejected: u8,
    reason: RejectReason,
    private: &[u8],
) -> [u8; MAD_LEN] {
    let repr = rej::Repr {
        local_comm_id: ids.0,
        remote_comm_id: ids.1,
        message_rejected: rejected,
        reject_info_length: 0,
        reason,
        ari: [0; rej::ARI_LEN],
        private_data: padded(private),
    };
    bytes(tid, Message::Rej(repr))
}

/// Our DREQ for `conn`, under a TID of ours.
pub(crate) fn dreq(conn: &Conn) -> [u8; MAD_LEN] {
    let repr = dreq::Repr {
        local_comm_id: conn.id.0,
        remote_comm_id: conn.remote_id,
        remote_qpn: conn.remote_qpn,
        private_data: [0; dreq::PRIVATE_DATA_LEN],
    };
    bytes(form_tid(conn.id.0), Message::Dreq(repr))
}

/// A DREP from `local_id` to `remote_id`, echoing the DREQ's TID.
pub(crate) fn drep(ids: (u32, u32), tid: u64) -> [u8; MAD_LEN] {
    let repr = drep::Repr {
        local_comm_id: ids.0,
        remote_comm_id: ids.1,
        private_data: [0; drep::PRIVATE_DATA_LEN],
    };
    bytes(tid, Message::Drep(repr))
}

/// Whether a REQ or SIDR_REQ of `service_id` carries a `cma_hdr`: an RDMA IP CM service ID of
/// `space` (a REQ's may be of the UDP port space too, as rdma_cm listens for both).
fn has_cma_hdr(service_id: u64, space: cma::PortSpace) -> bool {
    let sid = cma::ServiceId(service_id);
    let port_space = sid.port_space();
    sid.is_ip_cm()
        && (port_space == space
            || (space == cma::PortSpace::TCP && port_space == cma::PortSpace::UDP))
}

/// The private data of a REQ or SIDR_REQ of ours: the `cma_hdr` (our port, our address and
/// the peer's) where [`has_cma_hdr`], then the consumer's data.
pub(crate) fn join_cma_hdr(
    service_id: u64,
    space: cma::PortSpace,
    (port, src, dst): (u16, IpAddr, IpAddr),
    user: &[u8],
) -> Vec<u8> {
    let mut private = Vec::with_capacity(cma::HEADER_LEN + user.len());
    if has_cma_hdr(service_id, space) {
        //= ibta:annex11/A11
        //# an RDMA IP CM REQ's private data starts with the cma_hdr: version, IP version,
        //# the active side's port, both addresses
        let mut header = [0; cma::HEADER_LEN];
        cma::Repr { port, src, dst }.emit(&mut cma::Packet::new_unchecked(&mut header[..]));
        private.extend_from_slice(&header);
    }
    private.extend_from_slice(user);
    private
}

/// The peer's port and the consumer's private data of a REQ or SIDR_REQ (`what`): after the
/// `cma_hdr` where [`has_cma_hdr`], else the whole. A bad `cma_hdr` is `None`, counted in
/// `cm_rx_bad_private_data`; the caller answers it as its protocol says.
pub(crate) fn split_cma_hdr(
    nic: &mut Nic,
    what: &'static str,
    service_id: u64,
    space: cma::PortSpace,
    private_data: &[u8],
) -> Option<(Option<u16>, Vec<u8>)> {
    if !has_cma_hdr(service_id, space) {
        return Some((None, private_data.to_vec()));
    }
    match cma::Packet::new_checked(private_data).and_then(|p| cma::Repr::parse(&p)) {
        Ok(header) => Some((Some(header.port), private_data[cma::HEADER_LEN..].to_vec())),
        Err(err) => {
            tracing::debug!(%err, what, "a bad cma_hdr");
            nic.stats_mut().cm_rx_bad_private_data += 1;
            None
        }
    }
}

/// Where a connection's MADs go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct To {
    pub(crate) peer: IpAddr,
    pub(crate) local: IpAddr,
    pub(crate) peer_qp: Qpn,
}

impl To {
    pub(crate) fn conn(conn: &Conn) -> Self {
        Self {
            peer: conn.peer,
            local: conn.local,
            peer_qp: conn.peer_cm_qp,
        }
    }

    /// Back where `datagram` came from.
    pub(crate) fn reply(datagram: &GsiDatagram) -> Self {
        Self {
            peer: datagram.peer,
            local: datagram.local,
            peer_qp: datagram.peer_qp,
        }
    }
}

/// Sends `mad` through QP 1; a full send queue loses it (a retry or the peer's sends it again),
/// traced.
pub(crate) fn send(nic: &mut Nic, to: To, mad: [u8; MAD_LEN]) {
    let datagram = GsiDatagram {
        peer: to.peer,
        local: to.local,
        peer_qp: to.peer_qp,
        mad,
    };
    if let Err(err) = nic.send_gsi(datagram) {
        tracing::debug!(%err, peer = %to.peer, "cm mad not sent");
    }
}
