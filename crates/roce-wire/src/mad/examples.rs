//! One MAD of each CM message, with a distinct value in every field, shaped as rping's
//! connection would be (service ID of port 7174, a `cma_hdr` from 198.18.0.1 to 198.18.0.12):
//! for tests here and in other crates (the tshark cross-check, `roce dump`'s tests).

use std::net::{IpAddr, Ipv4Addr};

use crate::mad::cm::{CmMad, Message};
use crate::mad::cma::{self, PortSpace, ServiceId};
use crate::mad::{drep, dreq, mra, rej, rep, req, rtu, sidr_rep, sidr_req};
use crate::{Gid, Psn, Qpn};

/// rping's port.
pub const RPING_PORT: u16 = 7174;
/// The active side's address.
pub const ACTIVE_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The passive side's address.
pub const PASSIVE_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 12);
/// The active side's source port in the `cma_hdr`.
pub const ACTIVE_PORT: u16 = 47_123;

const ACTIVE_COMM_ID: u32 = 0x1a2b_3c4d;
const PASSIVE_COMM_ID: u32 = 0x5e6f_7081;

/// A byte pattern for private data, so that an offset error shows.
fn pattern<const N: usize>(seed: u8) -> [u8; N] {
    let mut out = [0; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = seed.wrapping_add(i as u8);
    }
    out
}

/// The REQ: rping's connection parameters, every bit field non-zero where it can be.
pub fn req() -> req::Repr {
    let mut private_data: [u8; req::PRIVATE_DATA_LEN] = pattern(0x40);
    cma::Repr {
        port: ACTIVE_PORT,
        src: IpAddr::V4(ACTIVE_IP),
        dst: IpAddr::V4(PASSIVE_IP),
    }
    .emit(&mut cma::Packet::new_unchecked(&mut private_data[..]));
    let path = |flow_label, local: Ipv4Addr, remote: Ipv4Addr| req::Path {
        local_lid: 0xffff,
        remote_lid: 0xffff,
        local_gid: Gid::from_ip(IpAddr::V4(local)),
        remote_gid: Gid::from_ip(IpAddr::V4(remote)),
        flow_label,
        packet_rate: 0x2a,
        traffic_class: 0x68,
        hop_limit: 64,
        sl: 5,
        subnet_local: true,
        local_ack_timeout: 19,
    };
    req::Repr {
        local_comm_id: ACTIVE_COMM_ID,
        vendor_id: 0x00_02c9,
        service_id: ServiceId::new(PortSpace::TCP, RPING_PORT).0,
        local_ca_guid: 0x0200_5eff_fe12_0001,
        local_qkey: 0x1234_5678,
        local_qpn: Qpn::new(0x00_0011),
        responder_resources: 1,
        local_eecn: 0x00_0a0b,
        initiator_depth: 2,
        remote_eecn: 0x00_0c0d,
        remote_cm_response_timeout: 20,
        transport_service_type: req::TRANSPORT_UC,
        end_to_end_flow_control: true,
        starting_psn: Psn::new(0x76_5432),
        local_cm_response_timeout: 22,
        retry_count: 7,
        partition_key: 0xffff,
        path_mtu: 3,
        rdc_exists: true,
        rnr_retry_count: 6,
        max_cm_retries: 15,
        srq: true,
        extended_transport_type: 5,
        primary_path: path(0x1_2345, ACTIVE_IP, PASSIVE_IP),
        alternate_path: path(0xa_bcde, PASSIVE_IP, ACTIVE_IP),
        sap_supported: true,
        private_data,
    }
}

/// The REP that answers [`req()`].
pub fn rep() -> rep::Repr {
    rep::Repr {
        local_comm_id: PASSIVE_COMM_ID,
        remote_comm_id: ACTIVE_COMM_ID,
        local_qkey: 0x8765_4321,
        local_qpn: Qpn::new(0x00_0012),
        local_eecn: 0x00_0e0f,
        starting_psn: Psn::new(0x12_3456),
        vendor_id: 0x00_02c9,
        responder_resources: 3,
        initiator_depth: 4,
        target_ack_delay: 15,
        failover_accepted: 2,
        end_to_end_flow_control: true,
        rnr_retry_count: 5,
        srq: true,
        local_ca_guid: 0x0200_5eff_fe12_000c,
        private_data: pattern(0x80),
    }
}

/// Each CM message decoded here, in handshake order (REQ, MRA, REP, RTU, DREQ, DREP, REJ),
/// each in a MAD whose header also varies.
pub fn all() -> Vec<CmMad> {
    let tid = 0x0000_0001_1a2b_3c4d;
    let mut mads = vec![
        CmMad::new(tid, Message::Req(req())),
        CmMad::new(
            tid,
            Message::Mra(mra::Repr {
                local_comm_id: PASSIVE_COMM_ID,
                remote_comm_id: ACTIVE_COMM_ID,
                message_mraed: mra::MRAED_REQ,
                service_timeout: 24,
                private_data: pattern(0x11),
            }),
        ),
        CmMad::new(tid, Message::Rep(rep())),
        CmMad::new(
            tid + 1,
            Message::Rtu(rtu::Repr {
                local_comm_id: ACTIVE_COMM_ID,
                remote_comm_id: PASSIVE_COMM_ID,
                private_data: pattern(0x22),
            }),
        ),
        CmMad::new(
            tid + 2,
            Message::Dreq(dreq::Repr {
                local_comm_id: ACTIVE_COMM_ID,
                remote_comm_id: PASSIVE_COMM_ID,
                remote_qpn: Qpn::new(0x00_0012),
                private_data: pattern(0x33),
            }),
        ),
        CmMad::new(
            tid + 2,
            Message::Drep(drep::Repr {
                local_comm_id: PASSIVE_COMM_ID,
                remote_comm_id: ACTIVE_COMM_ID,
                private_data: pattern(0x44),
            }),
        ),
        CmMad::new(
            tid + 3,
            Message::Rej(rej::Repr {
                local_comm_id: PASSIVE_COMM_ID,
                remote_comm_id: ACTIVE_COMM_ID,
                message_rejected: rej::REJECTED_REQ,
                reject_info_length: 16,
                reason: rej::RejectReason::InvalidServiceId,
                ari: pattern(0x55),
                private_data: pattern(0x66),
            }),
        ),
        CmMad::new(
            tid + 4,
            Message::SidrReq(sidr_req::Repr {
                request_id: ACTIVE_COMM_ID,
                partition_key: 0xffff,
                service_id: ServiceId::new(PortSpace::UDP, RPING_PORT).0,
                private_data: pattern(0x77),
            }),
        ),
        CmMad::new(
            tid + 4,
            Message::SidrRep(sidr_rep::Repr {
                request_id: ACTIVE_COMM_ID,
                status: sidr_rep::SidrStatus::Success,
                additional_information_length: 0,
                qpn: Qpn::new(0x00_0034),
                service_id: ServiceId::new(PortSpace::UDP, RPING_PORT).0,
                q_key: 0x0123_4567,
                additional_information: [0; sidr_rep::ADDITIONAL_INFORMATION_LEN],
                private_data: pattern(0x88),
            }),
        ),
    ];
    // The REP carries ECE options in the attribute modifier, the DREP a class-specific value.
    mads[2].header.attr_mod = 0x0000_0001;
    mads[5].header.class_specific = 0x0102;
    mads
}
