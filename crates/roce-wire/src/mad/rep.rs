//! REP, the reply to a REQ: the passive side's QP, starting PSN and CA GUID (IBA vol. 1
//! §12.6.8, Table 110; kernel `ibta_vol1_c12.h` `CM_REP_*`).

use crate::bytes::{get_u24, get_u32, get_u64, set_u24, set_u32, set_u64};
use crate::mad::message::cm_message;
use crate::mad::{bits, flag, place, place_flag};
use crate::{ParseError, Psn, Qpn};

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

const TARGET_ACK_DELAY: u8 = 0xf8;
const FAILOVER_ACCEPTED: u8 = 0x06;
const END_TO_END_FLOW_CONTROL: u8 = 0x01;
const RNR_RETRY_COUNT: u8 = 0xe0;
const SRQ: u8 = 0x10;

cm_message! {
    name: "REP",
    a: "a",
    remote: remote_comm_id,
    fields: {
        /// Local Q_Key.
        local_qkey: u32,
        /// Local QPN.
        local_qpn: Qpn,
        /// Local EECN (24 bits).
        local_eecn: u32,
        /// Starting PSN.
        starting_psn: Psn,
        /// ECE vendor ID (24 bits).
        vendor_id: u32,
        /// Responder Resources.
        responder_resources: u8,
        /// Initiator Depth.
        initiator_depth: u8,
        /// Target ACK Delay (5 bits).
        target_ack_delay: u8,
        /// Failover Accepted (2 bits).
        failover_accepted: u8,
        /// End-to-End Flow Control.
        end_to_end_flow_control: bool,
        /// RNR Retry Count (3 bits).
        rnr_retry_count: u8,
        /// SRQ.
        srq: bool,
        /// Local CA GUID.
        local_ca_guid: u64,
    },
    emit_with: emit_fields,
    emit_doc: "Writes the message; reserved bits become 0 and each field keeps only its width.",
}

impl<T: AsRef<[u8]>> Packet<T> {
    fn byte(&self, at: usize) -> u8 {
        self.buffer.as_ref()[at]
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
}

impl Repr {
    /// Reads a REP.
    //= ibta:vol1/12.6.8
    //# Table 110 REP Message Contents: comm IDs, Q_Key, QPN, EECN, starting PSN, responder
    //# resources, initiator depth, target ACK delay, failover, flow control, RNR retry, SRQ,
    //# CA GUID, private data from byte 36
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self::read(packet))
    }

    /// The fields of its own, for `emit`.
    fn emit_fields(&self, buf: &mut [u8]) {
        let [_, vendor_h, vendor_m, vendor_l] = self.vendor_id.to_be_bytes();
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
    }
}
