//! The RDMA IP CM service (IBA Annex A11): how rdma_cm names a listening IP port in a REQ's
//! ServiceID, and the 36-byte `cma_hdr` that starts a REQ's private data with the IP addresses
//! and the active side's port (kernel `cma.c` `rdma_get_service_id`, `struct cma_hdr`).

use core::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::bytes::{get_u16, header_view, set_u16};
use crate::mad::array;
use crate::{Layer, ParseError};

/// The ServiceIDs of the RDMA IP CM service: `0x0000_0000_01xx_xxxx` (`IB_CMA_SERVICE_ID`).
pub const SERVICE_ID_PREFIX: u64 = 0x0000_0000_0100_0000;
/// The bits [`SERVICE_ID_PREFIX`] fixes (`IB_CMA_SERVICE_ID_MASK`).
pub const SERVICE_ID_MASK: u64 = 0xffff_ffff_ff00_0000;

/// An rdma_cm port space (`enum rdma_ucm_port_space`), bits 16–31 of the ServiceID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortSpace(pub u16);

impl PortSpace {
    /// `RDMA_PS_IPOIB`.
    pub const IPOIB: Self = Self(0x0002);
    /// `RDMA_PS_TCP`: connected QPs (RC), what rping and `ib_send_bw -R` use.
    pub const TCP: Self = Self(0x0106);
    /// `RDMA_PS_UDP`: UD QPs.
    pub const UDP: Self = Self(0x0111);
    /// `RDMA_PS_IB`: any QP type, addressed by AF_IB.
    pub const IB: Self = Self(0x013f);

    /// The name rdma_cm gives it, or `None`.
    pub const fn name(self) -> Option<&'static str> {
        match self {
            Self::IPOIB => Some("IPOIB"),
            Self::TCP => Some("TCP"),
            Self::UDP => Some("UDP"),
            Self::IB => Some("IB"),
            _ => None,
        }
    }
}

/// A ServiceID read as the RDMA IP CM service reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServiceId(pub u64);

impl ServiceId {
    /// The ServiceID rdma_cm listens on for `port` in `space`: `(space << 16) + port`
    /// (kernel `rdma_get_service_id`; `RDMA_PS_*` already hold the 0x01 of the prefix).
    //= ibta:annex11/A11.2
    //# the RDMA IP CM ServiceID is the prefix 0x0000000001, the protocol byte and the
    //# destination port
    pub const fn new(space: PortSpace, port: u16) -> Self {
        Self(((space.0 as u64) << 16) | port as u64)
    }

    /// Whether this ServiceID is in the RDMA IP CM range.
    pub const fn is_ip_cm(self) -> bool {
        self.0 & SERVICE_ID_MASK == SERVICE_ID_PREFIX
    }

    /// The port space (bits 16–31, `rdma_ps_from_service_id`).
    pub const fn port_space(self) -> PortSpace {
        PortSpace((self.0 >> 16) as u16)
    }

    /// The listening port (bits 0–15, `cma_port_from_service_id`).
    pub const fn port(self) -> u16 {
        self.0 as u16
    }
}

impl fmt::Display for ServiceId {
    /// `0x0000000001061c06 (RDMA TCP port 7174)`, or the bare number outside the IP CM range.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)?;
        if self.is_ip_cm() {
            match self.port_space().name() {
                Some(name) => write!(f, " (RDMA {name} port {})", self.port())?,
                None => write!(
                    f,
                    " (RDMA ps {:#06x} port {})",
                    self.port_space().0,
                    self.port()
                )?,
            }
        }
        Ok(())
    }
}

mod field {
    use crate::field::Field;
    pub(super) const VERSION: usize = 0;
    /// IP version (7:4), reserved (3:0).
    pub(super) const IP_VERSION: usize = 1;
    pub(super) const PORT: Field = 2..4;
    pub(super) const SRC_ADDR: Field = 4..20;
    pub(super) const DST_ADDR: Field = 20..36;
}

/// Length of the `cma_hdr`.
pub const HEADER_LEN: usize = field::DST_ADDR.end;
/// The only `cma_version` (`CMA_VERSION`).
pub const CMA_VERSION: u8 = 0x00;
/// Bytes of consumer private data that follow the header in a REQ (92 − 36).
pub const USER_DATA_LEN: usize = super::req::PRIVATE_DATA_LEN - HEADER_LEN;

header_view!(
    "A view of a `cma_hdr`, the first 36 bytes of a REQ's private data.",
    Layer::CmaHdr,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// `cma_version` (Wireshark shows it as major/minor nibbles): 0.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// The IP version, 4 or 6 (high nibble of byte 1).
    pub fn ip_version(&self) -> u8 {
        self.buffer.as_ref()[field::IP_VERSION] >> 4
    }

    /// The active side's source port.
    pub fn port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PORT)
    }

    /// The source address's 16 bytes.
    pub fn src_addr_bytes(&self) -> [u8; 16] {
        array(self.buffer.as_ref(), field::SRC_ADDR.start)
    }

    /// The destination address's 16 bytes.
    pub fn dst_addr_bytes(&self) -> [u8; 16] {
        array(self.buffer.as_ref(), field::DST_ADDR.start)
    }
}

/// The fields of a `cma_hdr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The active side's source port.
    pub port: u16,
    /// The active side's address.
    pub src: IpAddr,
    /// The address the active side connects to (the listener's).
    pub dst: IpAddr,
}

impl Repr {
    /// Reads a `cma_hdr`: the version must be 0 and the IP version 4 or 6, as rdma_cm's passive
    /// side requires (`cma_save_ip_info`, `cma_match_private_data`). An IPv4 address is the last
    /// 4 of its 16 bytes (the 12 before are zero, not the `::ffff:` of a GID).
    //= ibta:annex11/A11
    //# the private data of a REQ starts with the RDMA IP CM header: version, IP version,
    //# source port, source and destination IP addresses (IPv4 in the last 4 bytes)
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, ParseError> {
        packet.check_len()?;
        let (version, ip_version) = (packet.version(), packet.ip_version());
        let addr = |bytes: [u8; 16]| match ip_version {
            4 => Some(IpAddr::V4(Ipv4Addr::new(
                bytes[12], bytes[13], bytes[14], bytes[15],
            ))),
            6 => Some(IpAddr::V6(Ipv6Addr::from(bytes))),
            _ => None,
        };
        match (
            version,
            addr(packet.src_addr_bytes()),
            addr(packet.dst_addr_bytes()),
        ) {
            (CMA_VERSION, Some(src), Some(dst)) => Ok(Self {
                port: packet.port(),
                src,
                dst,
            }),
            _ => Err(ParseError::BadCmaHeader {
                version,
                ip_version,
            }),
        }
    }

    /// The IP version the header says: 6 if either address is IPv6.
    pub const fn ip_version(&self) -> u8 {
        match (self.src, self.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => 4,
            _ => 6,
        }
    }

    /// Length of the emitted header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header. Mixed families are written as IPv6 (IPv4 as `::ffff:a.b.c.d`), since
    /// one IP version covers both addresses.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let version = self.ip_version();
        let bytes = |ip: IpAddr| -> [u8; 16] {
            match (ip, version) {
                (IpAddr::V4(v4), 4) => {
                    let mut out = [0; 16];
                    out[12..].copy_from_slice(&v4.octets());
                    out
                }
                (IpAddr::V4(v4), _) => v4.to_ipv6_mapped().octets(),
                (IpAddr::V6(v6), _) => v6.octets(),
            }
        };
        let buf = packet.buffer.as_mut();
        buf[field::VERSION] = CMA_VERSION;
        buf[field::IP_VERSION] = version << 4;
        set_u16(buf, field::PORT, self.port);
        buf[field::SRC_ADDR].copy_from_slice(&bytes(self.src));
        buf[field::DST_ADDR].copy_from_slice(&bytes(self.dst));
    }
}
