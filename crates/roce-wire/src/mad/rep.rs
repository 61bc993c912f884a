//! REP, the reply to a REQ: the passive side's QP, starting PSN and CA GUID (IBA vol. 1
//! §12.6.8, Table 110; kernel `ibta_vol1_c12.h` `CM_REP_*`).

use crate::bytes::{get_u24, get_u32, get_u64, header_view, set_u24, set_u32, set_u64};
use crate::mad::{DATA_LEN, array, bits, flag, place, place_flag};
use crate::{Layer, ParseError, Psn, Qpn};

mod field {
    use crate::field::Field;
    pub(super) const LOCAL_COMM_ID: Field = 0..4;
    pub(super) const REMOTE_COMM_ID: Field = 4..8;
    pub(super) const LOCAL_QKEY: Field = 8..12;
    /// Local QPN (24 bits), then the high byte of the ECE vendor ID.
    pub(super) const LOCAL_QPN: Field = 12..15;
    pub(super) const VENDOR_ID_H: usize = 15;
    pub(super) const LOCAL_EECN: Field = 16..19;
    pub(super) const VENDOR_ID_M: usize = 19;
    pub(super) const STARTING_PSN: Field = 20..23;
    pub(super) const VENDOR_ID_L: usize = 23;
    pub(super) const RESPONDER_RESOURCES: usize = 24;
    pub(super) const INITIATOR_DEPTH: usize = 25;
    /// Target ACK Delay (7:3), Failover Accepted (2:1), End-to-End Flow Control (0).
    pub(super) const BYTE_26: usize = 26;
    /// RNR Retry Count (7:5), SRQ (4).
    pub(super) const BYTE_27: usize = 27;
    pub(super) const LOCAL_CA_GUID: Field = 28..36;
    pub(super) const PRIVATE_DATA: Field = 36..232;
}

/// Bytes of private data a REP carries.
pub const PRIVATE_DATA_LEN: usize = field::PRIVATE_DATA.end - field::PRIVATE_DATA.start;

const TARGET_ACK_DELAY: u8 = 0xf8;
const FAILOVER_ACCEPTED: u8 = 0x06;
const END_TO_END_FLOW_CONTROL: u8 = 0x01;
const RNR_RETRY_COUNT: u8 = 0xe0;
const SRQ: u8 = 0x10;

header_view!(
    "A view of a CM REP message: the 232 bytes after the MAD header.",
    Layer::Cm("REP"),
    DATA_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    fn byte(&self, at: usize) -> u8 {
        self.buffer.as_ref()[at]
    }

    /// Local Communication ID: the passive side's.
    pub fn local_comm_id(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::LOCAL_COMM_ID)
    }

    /// Remote Communication ID: the REQ's local one.
    pub fn remote_comm_id(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::REMOTE_COMM_ID)
    }

    /// Local Q_Key (UD only).
    pub fn local_qkey(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::LOCAL_QKEY)
    }

    /// Local QPN: the passive side's QP.
    pub fn local_qpn(&self) -> Qpn {
        Qpn::new(get_u24(self.buffer.as_ref(), field::LOCAL_QPN))
    }

    /// Local EE context number (RD only).
    pub fn local_eecn(&self) -> u32 {
        get_u24(self.buffer.as_ref(), field::LOCAL_EECN)
    }

    /// Starting PSN: the first PSN the passive side sends.
    pub fn starting_psn(&self) -> Psn {
        Psn::new(get_u24(self.buffer.as_ref(), field::STARTING_PSN))
    }

    /// The ECE vendor ID, from its three bytes after the 24-bit fields (kernel
    /// `CM_REP_VENDORID_H/M/L`).
    pub fn vendor_id(&self) -> u32 {
        u32::from_be_bytes([
            0,
            self.byte(field::VENDOR_ID_H),
            self.byte(field::VENDOR_ID_M),
            self.byte(field::VENDOR_ID_L),
        ])
    }

    /// Responder Resources.
    pub fn responder_resources(&self) -> u8 {
        self.byte(field::RESPONDER_RESOURCES)
    }

    /// Initiator Depth.
    pub fn initiator_depth(&self) -> u8 {
        self.byte(field::INITIATOR_DEPTH)
    }

    /// Target ACK Delay (5 bits).
    pub fn target_ack_delay(&self) -> u8 {
        bits(self.byte(field::BYTE_26), TARGET_ACK_DELAY)
    }

    /// Failover Accepted (2 bits).
    pub fn failover_accepted(&self) -> u8 {
        bits(self.byte(field::BYTE_26), FAILOVER_ACCEPTED)
    }

    /// End-to-End Flow Control.
    pub fn end_to_end_flow_control(&self) -> bool {
        flag(self.byte(field::BYTE_26), END_TO_END_FLOW_CONTROL)
    }

    /// RNR Retry Count (3 bits).
    pub fn rnr_retry_count(&self) -> u8 {
        bits(self.byte(field::BYTE_27), RNR_RETRY_COUNT)
    }

    /// SRQ.
    pub fn srq(&self) -> bool {
        flag(self.byte(field::BYTE_27), SRQ)
    }

    /// Local CA GUID.
    pub fn local_ca_guid(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::LOCAL_CA_GUID)
    }

    /// The private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

/// The fields of a REP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Local Communication ID.
    pub local_comm_id: u32,
    /// Remote Communication ID.
    pub remote_comm_id: u32,
    /// Local Q_Key.
    pub local_qkey: u32,
    /// Local QPN.
    pub local_qpn: Qpn,
    /// Local EECN (24 bits).
    pub local_eecn: u32,
    /// Starting PSN.
    pub starting_psn: Psn,
    /// ECE vendor ID (24 bits).
    pub vendor_id: u32,
    /// Responder Resources.
    pub responder_resources: u8,
    /// Initiator Depth.
    pub initiator_depth: u8,
    /// Target ACK Delay (5 bits).
    pub target_ack_delay: u8,
    /// Failover Accepted (2 bits).
    pub failover_accepted: u8,
    /// End-to-End Flow Control.
    pub end_to_end_flow_control: bool,
    /// RNR Retry Count (3 bits).
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: bool,
    /// Local CA GUID.
    pub local_ca_guid: u64,
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Reads a REP.
    //= ibta:vol1/12.6.8
    //# Table 110 REP Message Contents: comm IDs, Q_Key, QPN, EECN, starting PSN, responder
    //# resources, initiator depth, target ACK delay, failover, flow control, RNR retry, SRQ,
    //# CA GUID, private data from byte 36
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            local_qkey: packet.local_qkey(),
            local_qpn: packet.local_qpn(),
            local_eecn: packet.local_eecn(),
            starting_psn: packet.starting_psn(),
            vendor_id: packet.vendor_id(),
            responder_resources: packet.responder_resources(),
            initiator_depth: packet.initiator_depth(),
            target_ack_delay: packet.target_ack_delay(),
            failover_accepted: packet.failover_accepted(),
            end_to_end_flow_control: packet.end_to_end_flow_control(),
            rnr_retry_count: packet.rnr_retry_count(),
            srq: packet.srq(),
            local_ca_guid: packet.local_ca_guid(),
            private_data: array(packet.buffer.as_ref(), field::PRIVATE_DATA.start),
        })
    }

    /// Length of the emitted message.
    pub const fn buffer_len(&self) -> usize {
        DATA_LEN
    }

    /// Writes the message; reserved bits become 0 and each field keeps only its width.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let buf = packet.buffer.as_mut();
        let [_, vendor_h, vendor_m, vendor_l] = self.vendor_id.to_be_bytes();
        set_u32(buf, field::LOCAL_COMM_ID, self.local_comm_id);
        set_u32(buf, field::REMOTE_COMM_ID, self.remote_comm_id);
        set_u32(buf, field::LOCAL_QKEY, self.local_qkey);
        set_u24(buf, field::LOCAL_QPN, self.local_qpn.value());
        buf[field::VENDOR_ID_H] = vendor_h;
        set_u24(buf, field::LOCAL_EECN, self.local_eecn & 0xff_ffff);
        buf[field::VENDOR_ID_M] = vendor_m;
        set_u24(buf, field::STARTING_PSN, self.starting_psn.value());
        buf[field::VENDOR_ID_L] = vendor_l;
        buf[field::RESPONDER_RESOURCES] = self.responder_resources;
        buf[field::INITIATOR_DEPTH] = self.initiator_depth;
        buf[field::BYTE_26] = place(self.target_ack_delay, TARGET_ACK_DELAY)
            | place(self.failover_accepted, FAILOVER_ACCEPTED)
            | place_flag(self.end_to_end_flow_control, END_TO_END_FLOW_CONTROL);
        buf[field::BYTE_27] =
            place(self.rnr_retry_count, RNR_RETRY_COUNT) | place_flag(self.srq, SRQ);
        set_u64(buf, field::LOCAL_CA_GUID, self.local_ca_guid);
        buf[field::PRIVATE_DATA].copy_from_slice(&self.private_data);
    }
}
