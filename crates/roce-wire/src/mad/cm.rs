//! A whole CM MAD: the MAD header and the message its attribute ID names, parsed in one call,
//! and the one line `roce dump` prints for it.

use core::fmt;

use crate::mad::{
    self, BASE_VERSION, CM_CLASS_VERSION, DATA_LEN, HEADER_LEN, MAD_LEN, METHOD_SEND,
    MGMT_CLASS_CM, cma, drep, dreq, mra, rej, rep, req, rtu, sidr_rep, sidr_req,
};
use crate::{EmitError, Layer, ParseError};

/// A CM attribute ID (kernel `ib_cm.h` `CM_*_ATTR_ID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attr {
    /// ClassPortInfo, 0x0001.
    ClassPortInfo,
    /// REQ, 0x0010.
    Req,
    /// MRA, 0x0011.
    Mra,
    /// REJ, 0x0012.
    Rej,
    /// REP, 0x0013.
    Rep,
    /// RTU, 0x0014.
    Rtu,
    /// DREQ, 0x0015.
    Dreq,
    /// DREP, 0x0016.
    Drep,
    /// SIDR_REQ, 0x0017.
    SidrReq,
    /// SIDR_REP, 0x0018.
    SidrRep,
    /// LAP, 0x0019.
    Lap,
    /// APR, 0x001A.
    Apr,
    /// Any other ID.
    Other(u16),
}

impl Attr {
    /// The attribute ID on the wire.
    //= ibta:vol1/12.6
    //# CM attribute IDs: ClassPortInfo 0x0001, REQ 0x0010, MRA 0x0011, REJ 0x0012, REP
    //# 0x0013, RTU 0x0014, DREQ 0x0015, DREP 0x0016, SIDR_REQ 0x0017, SIDR_REP 0x0018, LAP
    //# 0x0019, APR 0x001A
    pub const fn id(self) -> u16 {
        match self {
            Self::ClassPortInfo => 0x0001,
            Self::Req => 0x0010,
            Self::Mra => 0x0011,
            Self::Rej => 0x0012,
            Self::Rep => 0x0013,
            Self::Rtu => 0x0014,
            Self::Dreq => 0x0015,
            Self::Drep => 0x0016,
            Self::SidrReq => 0x0017,
            Self::SidrRep => 0x0018,
            Self::Lap => 0x0019,
            Self::Apr => 0x001a,
            Self::Other(id) => id,
        }
    }

    /// The attribute of an ID.
    pub const fn from_id(id: u16) -> Self {
        match id {
            0x0001 => Self::ClassPortInfo,
            0x0010 => Self::Req,
            0x0011 => Self::Mra,
            0x0012 => Self::Rej,
            0x0013 => Self::Rep,
            0x0014 => Self::Rtu,
            0x0015 => Self::Dreq,
            0x0016 => Self::Drep,
            0x0017 => Self::SidrReq,
            0x0018 => Self::SidrRep,
            0x0019 => Self::Lap,
            0x001a => Self::Apr,
            other => Self::Other(other),
        }
    }

    /// Its short name: `REQ`, `ClassPortInfo`, ... (`?` for `Other`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::ClassPortInfo => "ClassPortInfo",
            Self::Req => "REQ",
            Self::Mra => "MRA",
            Self::Rej => "REJ",
            Self::Rep => "REP",
            Self::Rtu => "RTU",
            Self::Dreq => "DREQ",
            Self::Drep => "DREP",
            Self::SidrReq => "SIDR_REQ",
            Self::SidrRep => "SIDR_REP",
            Self::Lap => "LAP",
            Self::Apr => "APR",
            Self::Other(_) => "?",
        }
    }
}

/// One CM message, of the attributes decoded here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    /// Request for communication.
    Req(req::Repr),
    /// Message receipt acknowledgement.
    Mra(mra::Repr),
    /// Reject.
    Rej(rej::Repr),
    /// Reply to a REQ.
    Rep(rep::Repr),
    /// Ready to use.
    Rtu(rtu::Repr),
    /// Disconnect request.
    Dreq(dreq::Repr),
    /// Disconnect reply.
    Drep(drep::Repr),
    /// Service ID resolution request (UD).
    SidrReq(sidr_req::Repr),
    /// Service ID resolution response (UD).
    SidrRep(sidr_rep::Repr),
}

impl Message {
    /// The attribute that carries this message.
    pub const fn attr(&self) -> Attr {
        match self {
            Self::Req(_) => Attr::Req,
            Self::Mra(_) => Attr::Mra,
            Self::Rej(_) => Attr::Rej,
            Self::Rep(_) => Attr::Rep,
            Self::Rtu(_) => Attr::Rtu,
            Self::Dreq(_) => Attr::Dreq,
            Self::Drep(_) => Attr::Drep,
            Self::SidrReq(_) => Attr::SidrReq,
            Self::SidrRep(_) => Attr::SidrRep,
        }
    }

    /// The sender's Local Communication ID, which every CM message starts with (a SIDR
    /// message's Request ID, in the same place: the kernel's CM puts its local ID there).
    pub const fn local_comm_id(&self) -> u32 {
        match self {
            Self::Req(m) => m.local_comm_id,
            Self::Mra(m) => m.local_comm_id,
            Self::Rej(m) => m.local_comm_id,
            Self::Rep(m) => m.local_comm_id,
            Self::Rtu(m) => m.local_comm_id,
            Self::Dreq(m) => m.local_comm_id,
            Self::Drep(m) => m.local_comm_id,
            Self::SidrReq(m) => m.request_id,
            Self::SidrRep(m) => m.request_id,
        }
    }

    /// Reads the message of `attr` from the 232 bytes of MAD data.
    pub fn parse(attr: Attr, data: &[u8]) -> Result<Self, ParseError> {
        Ok(match attr {
            Attr::Req => Self::Req(req::Repr::parse(&req::Packet::new_checked(data)?)?),
            Attr::Mra => Self::Mra(mra::Repr::parse(&mra::Packet::new_checked(data)?)?),
            Attr::Rej => Self::Rej(rej::Repr::parse(&rej::Packet::new_checked(data)?)?),
            Attr::Rep => Self::Rep(rep::Repr::parse(&rep::Packet::new_checked(data)?)?),
            Attr::Rtu => Self::Rtu(rtu::Repr::parse(&rtu::Packet::new_checked(data)?)?),
            Attr::Dreq => Self::Dreq(dreq::Repr::parse(&dreq::Packet::new_checked(data)?)?),
            Attr::Drep => Self::Drep(drep::Repr::parse(&drep::Packet::new_checked(data)?)?),
            Attr::SidrReq => Self::SidrReq(sidr_req::Repr::parse(&sidr_req::Packet::new_checked(
                data,
            )?)?),
            Attr::SidrRep => Self::SidrRep(sidr_rep::Repr::parse(&sidr_rep::Packet::new_checked(
                data,
            )?)?),
            other => return Err(ParseError::UnsupportedCmAttribute(other.id())),
        })
    }

    /// Writes the message into the 232 bytes of MAD data (`data` must hold them).
    fn emit(&self, data: &mut [u8]) {
        match self {
            Self::Req(m) => m.emit(&mut req::Packet::new_unchecked(data)),
            Self::Mra(m) => m.emit(&mut mra::Packet::new_unchecked(data)),
            Self::Rej(m) => m.emit(&mut rej::Packet::new_unchecked(data)),
            Self::Rep(m) => m.emit(&mut rep::Packet::new_unchecked(data)),
            Self::Rtu(m) => m.emit(&mut rtu::Packet::new_unchecked(data)),
            Self::Dreq(m) => m.emit(&mut dreq::Packet::new_unchecked(data)),
            Self::Drep(m) => m.emit(&mut drep::Packet::new_unchecked(data)),
            Self::SidrReq(m) => m.emit(&mut sidr_req::Packet::new_unchecked(data)),
            Self::SidrRep(m) => m.emit(&mut sidr_rep::Packet::new_unchecked(data)),
        }
    }
}

/// A CM MAD: its header and its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmMad {
    /// The MAD header; its `attr_id` is the message's.
    pub header: mad::Repr,
    /// The message.
    pub message: Message,
}

impl CmMad {
    /// A MAD as ib_cm sends it: [`mad::Repr::cm`] with the message's attribute.
    pub const fn new(tid: u64, message: Message) -> Self {
        Self {
            header: mad::Repr::cm(message.attr(), tid),
            message,
        }
    }

    /// Reads a CM MAD from at least [`MAD_LEN`] bytes: base version 1, class CM version 2,
    /// and an attribute with a decoder here. The method is not checked (the line shows it
    /// when it is not Send).
    //= ibta:vol1/13.4.2
    //# a MAD is 256 bytes: the 24-byte common header, then 232 bytes of class data
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        if bytes.len() < MAD_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::Mad,
                need: MAD_LEN,
                got: bytes.len(),
            });
        }
        let header = mad::Repr::parse(&mad::Packet::new_checked(bytes)?)?;
        if header.base_version != BASE_VERSION {
            return Err(ParseError::BadMadBaseVersion(header.base_version));
        }
        if header.mgmt_class != MGMT_CLASS_CM || header.class_version != CM_CLASS_VERSION {
            return Err(ParseError::NotCm {
                mgmt_class: header.mgmt_class,
                class_version: header.class_version,
            });
        }
        let message = Message::parse(Attr::from_id(header.attr_id), &bytes[HEADER_LEN..MAD_LEN])?;
        Ok(Self { header, message })
    }

    /// Length of the emitted MAD.
    pub const fn buffer_len(&self) -> usize {
        MAD_LEN
    }

    /// Writes the MAD into exactly [`MAD_LEN`] bytes. The header's attribute ID is written
    /// as the message's, whatever `header.attr_id` says.
    pub fn emit(&self, buffer: &mut [u8]) -> Result<(), EmitError> {
        if buffer.len() != MAD_LEN {
            return Err(EmitError::BufferLength {
                need: MAD_LEN,
                got: buffer.len(),
            });
        }
        let header = mad::Repr {
            attr_id: self.message.attr().id(),
            ..self.header
        };
        let (head, data) = buffer.split_at_mut(HEADER_LEN);
        header.emit(&mut mad::Packet::new_unchecked(head));
        self.message.emit(&mut data[..DATA_LEN]);
        Ok(())
    }
}

/// `CM REQ tid=0x… lcid=0x… sid=… qpn=… psn=… mtu=1024 …`: the MAD in one line.
impl fmt::Display for CmMad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = &self.header;
        write!(
            f,
            "CM {} tid={:#x} lcid={:#010x}",
            self.message.attr().name(),
            h.tid,
            self.message.local_comm_id()
        )?;
        match &self.message {
            Message::Req(m) => write_req(f, m)?,
            Message::Mra(m) => write!(
                f,
                " rcid={:#010x} mraed={} timeout={}",
                m.remote_comm_id,
                message_name(m.message_mraed),
                m.service_timeout
            )?,
            Message::Rej(m) => {
                write!(
                    f,
                    " rcid={:#010x} rejected={} reason={}",
                    m.remote_comm_id,
                    message_name(m.message_rejected),
                    m.reason
                )?;
                if m.reject_info_length != 0 {
                    write!(f, " ari_len={}", m.reject_info_length)?;
                }
            }
            Message::Rep(m) => write!(
                f,
                " rcid={:#010x} qpn={} psn={} rr={} depth={} rnr={} ack_delay={} guid={:#018x}{}",
                m.remote_comm_id,
                m.local_qpn,
                m.starting_psn,
                m.responder_resources,
                m.initiator_depth,
                m.rnr_retry_count,
                m.target_ack_delay,
                m.local_ca_guid,
                if m.srq { " srq" } else { "" }
            )?,
            Message::Rtu(m) => write!(f, " rcid={:#010x}", m.remote_comm_id)?,
            Message::Dreq(m) => write!(f, " rcid={:#010x} qpn={}", m.remote_comm_id, m.remote_qpn)?,
            Message::Drep(m) => write!(f, " rcid={:#010x}", m.remote_comm_id)?,
            Message::SidrReq(m) => write!(
                f,
                " sid={} pkey={:#06x}",
                cma::ServiceId(m.service_id),
                m.partition_key
            )?,
            Message::SidrRep(m) => write!(
                f,
                " status={} qpn={} qkey={:#010x} sid={}",
                m.status,
                m.qpn,
                m.q_key,
                cma::ServiceId(m.service_id)
            )?,
        }
        if h.method != METHOD_SEND {
            write!(f, " method={:#04x}", h.method)?;
        }
        if h.status != 0 {
            write!(f, " status={:#06x}", h.status)?;
        }
        if h.attr_mod != 0 {
            write!(f, " attr_mod={:#x}", h.attr_mod)?;
        }
        Ok(())
    }
}

fn write_req(f: &mut fmt::Formatter<'_>, m: &req::Repr) -> fmt::Result {
    write!(
        f,
        " sid={} qpn={} psn={}",
        cma::ServiceId(m.service_id),
        m.local_qpn,
        m.starting_psn
    )?;
    match req::mtu_bytes(m.path_mtu) {
        Some(bytes) => write!(f, " mtu={bytes}")?,
        None => write!(f, " mtu=code{}", m.path_mtu)?,
    }
    match m.transport_service_type {
        req::TRANSPORT_RC => {}
        req::TRANSPORT_UC => f.write_str(" UC")?,
        req::TRANSPORT_XRC => f.write_str(" XRC")?,
        other => write!(f, " transport={other}")?,
    }
    write!(
        f,
        " rr={} depth={} retry={} rnr={} timeout={}/{} guid={:#018x}",
        m.responder_resources,
        m.initiator_depth,
        m.retry_count,
        m.rnr_retry_count,
        m.local_cm_response_timeout,
        m.remote_cm_response_timeout,
        m.local_ca_guid
    )?;
    if m.srq {
        f.write_str(" srq")?;
    }
    if let Ok(hdr) =
        cma::Packet::new_checked(&m.private_data[..]).and_then(|p| cma::Repr::parse(&p))
    {
        let dport = cma::ServiceId(m.service_id).port();
        write!(
            f,
            " cma({} > {})",
            SocketText(hdr.src, hdr.port),
            SocketText(hdr.dst, dport)
        )?;
    }
    Ok(())
}

/// `REQ`, `REP` or `other`: the Message MRAed / Message Rejected codes.
const fn message_name(code: u8) -> &'static str {
    match code {
        0 => "REQ",
        1 => "REP",
        _ => "other",
    }
}

/// `addr:port`, with brackets around IPv6.
struct SocketText(std::net::IpAddr, u16);

impl fmt::Display for SocketText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            std::net::IpAddr::V6(v6) => write!(f, "[{v6}]:{}", self.1),
            v4 => write!(f, "{v4}:{}", self.1),
        }
    }
}
