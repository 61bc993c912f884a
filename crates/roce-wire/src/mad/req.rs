//! REQ, the request for communication: the active side's QP, its starting PSN, the path, and
//! the private data (IBA vol. 1 §12.6.5, Table 106; kernel `ibta_vol1_c12.h` `CM_REQ_*`).

use crate::bytes::{get_u16, get_u24, get_u32, get_u64, set_u16, set_u24, set_u32, set_u64};
use crate::mad::message::cm_message;
use crate::mad::{DATA_LEN, array, bits, flag, place, place_flag};
use crate::{Gid, ParseError, Psn, Qpn};

mod field {
    use crate::field::Field;
    pub(super) const LOCAL_COMM_ID: Field = 0..4;
    /// Reserved 8 bits, then the ECE vendor ID (kernel `CM_REQ_VENDOR_ID`).
    pub(super) const VENDOR_ID: Field = 5..8;
    pub(super) const SERVICE_ID: Field = 8..16;
    pub(super) const LOCAL_CA_GUID: Field = 16..24;
    pub(super) const LOCAL_QKEY: Field = 28..32;
    pub(super) const LOCAL_QPN: Field = 32..35;
    pub(super) const RESPONDER_RESOURCES: usize = 35;
    pub(super) const LOCAL_EECN: Field = 36..39;
    pub(super) const INITIATOR_DEPTH: usize = 39;
    pub(super) const REMOTE_EECN: Field = 40..43;
    /// Remote CM response timeout (7:3), transport service type (2:1), E2E flow control (0).
    pub(super) const BYTE_43: usize = 43;
    pub(super) const STARTING_PSN: Field = 44..47;
    /// Local CM response timeout (7:3), retry count (2:0).
    pub(super) const BYTE_47: usize = 47;
    pub(super) const PARTITION_KEY: Field = 48..50;
    /// Path MTU (7:4), RDC exists (3), RNR retry count (2:0).
    pub(super) const BYTE_50: usize = 50;
    /// Max CM retries (7:4), SRQ (3), extended transport type (2:0).
    pub(super) const BYTE_51: usize = 51;
    pub(super) const PRIMARY_PATH: Field = 52..96;
    pub(super) const ALTERNATE_PATH: Field = 96..140;
    pub(super) const PRIVATE_DATA: Field = 140..232;
}

/// Length of one path description (primary or alternate).
pub const PATH_LEN: usize = 44;

const REMOTE_CM_RESPONSE_TIMEOUT: u8 = 0xf8;
const TRANSPORT_SERVICE_TYPE: u8 = 0x06;
const END_TO_END_FLOW_CONTROL: u8 = 0x01;
const LOCAL_CM_RESPONSE_TIMEOUT: u8 = 0xf8;
const RETRY_COUNT: u8 = 0x07;
const PATH_MTU: u8 = 0xf0;
const RDC_EXISTS: u8 = 0x08;
const RNR_RETRY_COUNT: u8 = 0x07;
const MAX_CM_RETRIES: u8 = 0xf0;
const SRQ: u8 = 0x08;
const EXTENDED_TRANSPORT_TYPE: u8 = 0x07;
const SL: u8 = 0xf0;
const SUBNET_LOCAL: u8 = 0x08;
const LOCAL_ACK_TIMEOUT: u8 = 0xf8;
/// In the alternate path's last byte (kernel `CM_REQ_SAP_SUPPORTED`).
const SAP_SUPPORTED: u8 = 0x04;

/// Transport service type RC (`IB_CM_REQ_TRANSPORT_SERVICE_TYPE` 0; 1 is UC, 3 XRC).
pub const TRANSPORT_RC: u8 = 0;
/// Transport service type UC.
pub const TRANSPORT_UC: u8 = 1;
/// Transport service type XRC.
pub const TRANSPORT_XRC: u8 = 3;

/// The bytes of an IBA MTU code (1 = 256 … 5 = 4096), `None` for a reserved code.
pub const fn mtu_bytes(code: u8) -> Option<u32> {
    match code {
        1..=5 => Some(128 << code),
        _ => None,
    }
}

cm_message! {
    name: "REQ",
    a: "a",
    fields: {
        /// ECE vendor ID (24 bits).
        vendor_id: u32,
        /// ServiceID.
        service_id: u64,
        /// Local CA GUID.
        local_ca_guid: u64,
        /// Local Q_Key.
        local_qkey: u32,
        /// Local QPN.
        local_qpn: Qpn,
        /// Responder Resources.
        responder_resources: u8,
        /// Local EECN (24 bits).
        local_eecn: u32,
        /// Initiator Depth.
        initiator_depth: u8,
        /// Remote EECN (24 bits).
        remote_eecn: u32,
        /// Remote CM Response Timeout (5 bits).
        remote_cm_response_timeout: u8,
        /// Transport Service Type (2 bits).
        transport_service_type: u8,
        /// End-to-End Flow Control.
        end_to_end_flow_control: bool,
        /// Starting PSN.
        starting_psn: Psn,
        /// Local CM Response Timeout (5 bits).
        local_cm_response_timeout: u8,
        /// Retry Count (3 bits).
        retry_count: u8,
        /// Partition Key.
        partition_key: u16,
        /// Path Packet Payload MTU code (4 bits).
        path_mtu: u8,
        /// RDC Exists.
        rdc_exists: bool,
        /// RNR Retry Count (3 bits).
        rnr_retry_count: u8,
        /// Max CM Retries (4 bits).
        max_cm_retries: u8,
        /// SRQ.
        srq: bool,
        /// Extended Transport Type (3 bits).
        extended_transport_type: u8,
        /// The primary path.
        primary_path: Path,
        /// The alternate path.
        alternate_path: Path,
        /// SAP Supported.
        sap_supported: bool,
    },
    emit_with: emit_fields,
    emit_doc: "Writes the message; reserved bits become 0 and each field keeps only its width.",
}

impl<T: AsRef<[u8]>> Packet<T> {
    fn byte(&self, at: usize) -> u8 {
        self.buffer.as_ref()[at]
    }

    /// The ECE vendor ID (24 bits; 0 without ECE).
    pub fn vendor_id(&self) -> u32 {
        get_u24(self.buffer.as_ref(), field::VENDOR_ID)
    }

    /// ServiceID: for rdma_cm, see [`crate::mad::cma::ServiceId`].
    pub fn service_id(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::SERVICE_ID)
    }

    /// Local CA GUID.
    pub fn local_ca_guid(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::LOCAL_CA_GUID)
    }

    /// Local Q_Key (UD only).
    pub fn local_qkey(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::LOCAL_QKEY)
    }

    /// Local QPN: the active side's QP.
    pub fn local_qpn(&self) -> Qpn {
        Qpn::new(get_u24(self.buffer.as_ref(), field::LOCAL_QPN))
    }

    /// Responder Resources: RDMA READs and atomics the active side accepts at once.
    pub fn responder_resources(&self) -> u8 {
        self.byte(field::RESPONDER_RESOURCES)
    }

    /// Local EE context number (RD only).
    pub fn local_eecn(&self) -> u32 {
        get_u24(self.buffer.as_ref(), field::LOCAL_EECN)
    }

    /// Initiator Depth: RDMA READs and atomics the active side issues at once.
    pub fn initiator_depth(&self) -> u8 {
        self.byte(field::INITIATOR_DEPTH)
    }

    /// Remote EE context number (RD only).
    pub fn remote_eecn(&self) -> u32 {
        get_u24(self.buffer.as_ref(), field::REMOTE_EECN)
    }

    /// Remote CM Response Timeout (5 bits, 4.096 µs × 2^t).
    pub fn remote_cm_response_timeout(&self) -> u8 {
        bits(self.byte(field::BYTE_43), REMOTE_CM_RESPONSE_TIMEOUT)
    }

    /// Transport Service Type (2 bits): [`TRANSPORT_RC`], [`TRANSPORT_UC`], [`TRANSPORT_XRC`].
    pub fn transport_service_type(&self) -> u8 {
        bits(self.byte(field::BYTE_43), TRANSPORT_SERVICE_TYPE)
    }

    /// End-to-End Flow Control.
    pub fn end_to_end_flow_control(&self) -> bool {
        flag(self.byte(field::BYTE_43), END_TO_END_FLOW_CONTROL)
    }

    /// Starting PSN: the first PSN the active side sends.
    pub fn starting_psn(&self) -> Psn {
        Psn::new(get_u24(self.buffer.as_ref(), field::STARTING_PSN))
    }

    /// Local CM Response Timeout (5 bits).
    pub fn local_cm_response_timeout(&self) -> u8 {
        bits(self.byte(field::BYTE_47), LOCAL_CM_RESPONSE_TIMEOUT)
    }

    /// Retry Count (3 bits).
    pub fn retry_count(&self) -> u8 {
        bits(self.byte(field::BYTE_47), RETRY_COUNT)
    }

    /// Partition Key.
    pub fn partition_key(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PARTITION_KEY)
    }

    /// Path Packet Payload MTU (4 bits, an MTU code: see [`mtu_bytes`]).
    pub fn path_mtu(&self) -> u8 {
        bits(self.byte(field::BYTE_50), PATH_MTU)
    }

    /// RDC Exists.
    pub fn rdc_exists(&self) -> bool {
        flag(self.byte(field::BYTE_50), RDC_EXISTS)
    }

    /// RNR Retry Count (3 bits, 7 = forever).
    pub fn rnr_retry_count(&self) -> u8 {
        bits(self.byte(field::BYTE_50), RNR_RETRY_COUNT)
    }

    /// Max CM Retries (4 bits).
    pub fn max_cm_retries(&self) -> u8 {
        bits(self.byte(field::BYTE_51), MAX_CM_RETRIES)
    }

    /// SRQ: the active QP uses a shared receive queue.
    pub fn srq(&self) -> bool {
        flag(self.byte(field::BYTE_51), SRQ)
    }

    /// Extended Transport Type (3 bits).
    pub fn extended_transport_type(&self) -> u8 {
        bits(self.byte(field::BYTE_51), EXTENDED_TRANSPORT_TYPE)
    }

    /// The primary path.
    pub fn primary_path(&self) -> Path {
        Path::read(&self.buffer.as_ref()[field::PRIMARY_PATH])
    }

    /// The alternate path (all zero when there is none).
    pub fn alternate_path(&self) -> Path {
        Path::read(&self.buffer.as_ref()[field::ALTERNATE_PATH])
    }

    /// SAP Supported, in the alternate path's last byte.
    pub fn sap_supported(&self) -> bool {
        flag(self.byte(field::ALTERNATE_PATH.end - 1), SAP_SUPPORTED)
    }
}

/// One path of a REQ: the 44 bytes from Primary (or Alternate) Local Port LID to Local ACK
/// Timeout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Path {
    /// Local Port LID (0xFFFF, permissive, on RoCE).
    pub local_lid: u16,
    /// Remote Port LID.
    pub remote_lid: u16,
    /// Local Port GID: the active side's GID.
    pub local_gid: Gid,
    /// Remote Port GID.
    pub remote_gid: Gid,
    /// Flow Label (20 bits).
    pub flow_label: u32,
    /// Packet Rate (6 bits).
    pub packet_rate: u8,
    /// Traffic Class.
    pub traffic_class: u8,
    /// Hop Limit.
    pub hop_limit: u8,
    /// SL (4 bits).
    pub sl: u8,
    /// Subnet Local.
    pub subnet_local: bool,
    /// Local ACK Timeout (5 bits).
    pub local_ack_timeout: u8,
}

impl Path {
    /// Reads a path from its 44 bytes.
    fn read(b: &[u8]) -> Self {
        let flow = get_u32(b, 36..40);
        Self {
            local_lid: get_u16(b, 0..2),
            remote_lid: get_u16(b, 2..4),
            local_gid: Gid(array(b, 4)),
            remote_gid: Gid(array(b, 20)),
            flow_label: flow >> 12,
            packet_rate: (flow & 0x3f) as u8,
            traffic_class: b[40],
            hop_limit: b[41],
            sl: bits(b[42], SL),
            subnet_local: flag(b[42], SUBNET_LOCAL),
            local_ack_timeout: bits(b[43], LOCAL_ACK_TIMEOUT),
        }
    }

    /// Writes a path into its 44 bytes; reserved bits become 0.
    fn write(&self, b: &mut [u8]) {
        set_u16(b, 0..2, self.local_lid);
        set_u16(b, 2..4, self.remote_lid);
        b[4..20].copy_from_slice(&self.local_gid.0);
        b[20..36].copy_from_slice(&self.remote_gid.0);
        let flow = ((self.flow_label & 0xf_ffff) << 12) | u32::from(self.packet_rate & 0x3f);
        set_u32(b, 36..40, flow);
        b[40] = self.traffic_class;
        b[41] = self.hop_limit;
        b[42] = place(self.sl, SL) | place_flag(self.subnet_local, SUBNET_LOCAL);
        b[43] = place(self.local_ack_timeout, LOCAL_ACK_TIMEOUT);
    }
}

impl Repr {
    /// Reads a REQ.
    //= ibta:vol1/12.6.5
    //# Table 106 REQ Message Contents: the fields and bit positions of a REQ, private data
    //# from byte 140 to the end of the MAD
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        Ok(Self::read(packet))
    }

    /// The fields of its own, for `emit`.
    fn emit_fields(&self, buf: &mut [u8]) {
        buf[..DATA_LEN].fill(0);
        set_u24(buf, field::VENDOR_ID, self.vendor_id & 0xff_ffff);
        set_u64(buf, field::SERVICE_ID, self.service_id);
        set_u64(buf, field::LOCAL_CA_GUID, self.local_ca_guid);
        set_u32(buf, field::LOCAL_QKEY, self.local_qkey);
        set_u24(buf, field::LOCAL_QPN, self.local_qpn.value());
        buf[field::RESPONDER_RESOURCES] = self.responder_resources;
        set_u24(buf, field::LOCAL_EECN, self.local_eecn & 0xff_ffff);
        buf[field::INITIATOR_DEPTH] = self.initiator_depth;
        set_u24(buf, field::REMOTE_EECN, self.remote_eecn & 0xff_ffff);
        buf[field::BYTE_43] = place(self.remote_cm_response_timeout, REMOTE_CM_RESPONSE_TIMEOUT)
            | place(self.transport_service_type, TRANSPORT_SERVICE_TYPE)
            | place_flag(self.end_to_end_flow_control, END_TO_END_FLOW_CONTROL);
        set_u24(buf, field::STARTING_PSN, self.starting_psn.value());
        buf[field::BYTE_47] = place(self.local_cm_response_timeout, LOCAL_CM_RESPONSE_TIMEOUT)
            | place(self.retry_count, RETRY_COUNT);
        set_u16(buf, field::PARTITION_KEY, self.partition_key);
        buf[field::BYTE_50] = place(self.path_mtu, PATH_MTU)
            | place_flag(self.rdc_exists, RDC_EXISTS)
            | place(self.rnr_retry_count, RNR_RETRY_COUNT);
        buf[field::BYTE_51] = place(self.max_cm_retries, MAX_CM_RETRIES)
            | place_flag(self.srq, SRQ)
            | place(self.extended_transport_type, EXTENDED_TRANSPORT_TYPE);
        self.primary_path.write(&mut buf[field::PRIMARY_PATH]);
        self.alternate_path.write(&mut buf[field::ALTERNATE_PATH]);
        buf[field::ALTERNATE_PATH.end - 1] |= place_flag(self.sap_supported, SAP_SUPPORTED);
    }
}
