//! One line per packet, in the spirit of tcpdump: what `roce dump` prints and what the simulator
//! traces.
//!
//! ```text
//! 198.18.0.11:49441 > 198.18.0.12:4791 RC_SEND_ONLY qp=0x000011 psn=0x765543 ack_req len=64 icrc=ok
//! ```
//!
//! A UD SEND to QP 1 carries a MAD, shown after the transport part: `... UD_SEND_ONLY qp=0x000001
//! ... len=256 CM REQ tid=0x… lcid=0x… sid=0x0000000001061c06 (RDMA TCP port 7174) qpn=… icrc=ok`.

use core::fmt;

use crate::frame::{Ecn, Frame, Transport};
use crate::int;
use crate::mad::{self, gsi};
use crate::{CmMad, ParseError, RocePacket, RoceRepr};

/// Displays the RoCE part of a packet: opcode, dest QP, PSN, flags, the extension headers' key
/// fields and the payload length.
#[derive(Debug, Clone, Copy)]
pub struct Roce<'a>(pub &'a RoceRepr);

impl fmt::Display for Roce<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let repr = self.0;
        let bth = &repr.bth;
        write!(f, "{} qp={} psn={}", bth.opcode, bth.dest_qp, bth.psn)?;
        for (set, name) in [
            (bth.ack_req, "ack_req"),
            (bth.solicited_event, "se"),
            (bth.mig_req, "mig_req"),
            (bth.fecn, "fecn"),
            (bth.becn, "becn"),
        ] {
            if set {
                write!(f, " {name}")?;
            }
        }
        if bth.pkey != crate::bth::DEFAULT_PKEY {
            write!(f, " pkey={:#06x}", bth.pkey)?;
        }
        if let Some(feth) = repr.feth {
            write!(
                f,
                " feth(plt={} sel={})",
                feth.placement_type, feth.selectivity_level
            )?;
        }
        if let Some(deth) = repr.deth {
            write!(f, " deth(qkey={:#010x} src_qp={})", deth.qkey, deth.src_qp)?;
        }
        if let Some(reth) = repr.reth {
            write!(
                f,
                " reth(va={:#x} rkey={:#x} len={})",
                reth.va, reth.rkey, reth.dma_len
            )?;
        }
        if let Some(a) = repr.atomic_eth {
            write!(
                f,
                " atomic(va={:#x} rkey={:#x} swap_add={:#x} compare={:#x})",
                a.va, a.rkey, a.swap_add, a.compare
            )?;
        }
        if let Some(aeth) = repr.aeth {
            write!(f, " aeth({} msn={})", aeth.syndrome, aeth.msn)?;
        }
        if let Some(ack) = repr.atomic_ack_eth {
            write!(f, " atomic_ack(orig={:#x})", ack.orig_data)?;
        }
        if let Some(imm) = repr.immdt {
            write!(f, " imm={:#010x}", imm.imm_data)?;
        }
        if let Some(ieth) = repr.ieth {
            write!(f, " ieth(rkey={:#x})", ieth.rkey)?;
        }
        write!(f, " len={}", repr.payload_len)?;
        if bth.pad_count != 0 {
            write!(f, " pad={}", bth.pad_count)?;
        }
        Ok(())
    }
}

/// Displays a whole frame: addresses and ports, then the RoCE part and the ICRC check for RoCEv2,
/// or a short note for anything else.
#[derive(Debug, Clone, Copy)]
pub struct FrameLine<'a> {
    frame: &'a Frame<'a>,
    check_icrc: bool,
    /// For a frame the capture cut short: how many bytes of its RoCE packet were captured.
    captured: Option<usize>,
}

impl<'a> FrameLine<'a> {
    /// A line that checks the ICRC (`icrc=ok` or `icrc=BAD`).
    pub const fn new(frame: &'a Frame<'a>) -> Self {
        Self {
            frame,
            check_icrc: true,
            captured: None,
        }
    }

    /// A line for a frame that the capture's snap length cut short, parsed with the missing
    /// bytes as zeros: only the first `captured` bytes of its RoCE packet are real. The RoCE
    /// headers are shown if they were captured (else the BTH alone, or nothing), a MAD only if
    /// whole, and the ICRC, which cannot be checked, as `icrc=unchecked (cut short by the
    /// capture: N of M bytes)`.
    pub const fn cut_short(frame: &'a Frame<'a>, captured: usize) -> Self {
        Self {
            frame,
            check_icrc: false,
            captured: Some(captured),
        }
    }

    /// A line that does not check the ICRC (`icrc=unchecked`), for captures of paths that rewrite
    /// packets.
    pub const fn without_icrc(frame: &'a Frame<'a>) -> Self {
        Self {
            frame,
            check_icrc: false,
            captured: None,
        }
    }
}

impl fmt::Display for FrameLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let frame = self.frame;
        let Some(ip) = frame.ip else {
            return match frame.ethernet.map(|eth| eth.ether_type) {
                Some(ETHERTYPE_ARP) => f.write_str("ARP"),
                Some(crate::mac_control::ETHER_TYPE) => f.write_str("MAC control (PAUSE/PFC)"),
                Some(other) => write!(f, "ethertype {other:#06x}"),
                None => f.write_str("non-IP frame"),
            };
        };
        let (sport, dport) = match frame.transport {
            Some(Transport::Udp(udp, _)) => (Some(udp.src_port), Some(udp.dst_port)),
            Some(Transport::Tcp {
                src_port, dst_port, ..
            }) => (Some(src_port), Some(dst_port)),
            _ => (None, None),
        };
        write!(
            f,
            "{} > {}",
            Endpoint(ip.src, sport),
            Endpoint(ip.dst, dport)
        )?;
        if let Some(vlan) = frame.ethernet.and_then(|eth| eth.vlan) {
            write!(f, " vlan={} pcp={}", vlan.vid, vlan.pcp)?;
        }
        if ip.dscp != 0 {
            write!(f, " dscp={}", ip.dscp)?;
        }
        if ip.ecn != Ecn::NotEct {
            write!(f, " ecn={:?}", ip.ecn)?;
        }
        if let (Some(captured), Some(payload)) = (self.captured, frame.roce_payload()) {
            return write_cut_short(f, payload, captured);
        }
        if let Some(payload) = frame.roce_payload().filter(|p| int::flagged(p)) {
            write_int_packet(f, payload)?;
            return match (self.check_icrc, frame.verify_icrc()) {
                (false, _) => f.write_str(" icrc=unchecked"),
                (true, Ok(())) => f.write_str(" icrc=ok"),
                (true, Err(_)) => f.write_str(" icrc=BAD"),
            };
        }
        match (frame.roce(), frame.transport) {
            (Some(Ok(packet)), _) => {
                write_roce(f, &packet)?;
                match (self.check_icrc, frame.verify_icrc()) {
                    (false, _) => f.write_str(" icrc=unchecked"),
                    (true, Ok(())) => f.write_str(" icrc=ok"),
                    (true, Err(_)) => f.write_str(" icrc=BAD"),
                }
            }
            (Some(Err(err)), _) => write!(f, " RoCE malformed: {err}"),
            (None, Some(Transport::Udp(_, payload))) => write!(f, " UDP len={}", payload.len()),
            (None, Some(Transport::Tcp { payload_len, .. })) => write!(f, " TCP len={payload_len}"),
            (None, Some(Transport::Other(protocol))) => write!(f, " ip-proto={protocol}"),
            (None, None) => Ok(()),
        }
    }
}

fn write_roce(f: &mut fmt::Formatter<'_>, packet: &RocePacket<&[u8]>) -> fmt::Result {
    match RoceRepr::parse(packet) {
        Ok(repr) => {
            write!(f, " {}", Roce(&repr))?;
            match gsi::mad_of(packet) {
                Some(mad) => write!(f, " {}", Mad(mad)),
                None => Ok(()),
            }
        }
        Err(err) => write!(f, " RoCE malformed: {err}"),
    }
}

/// The RoCE part of a packet that carries HPCC's INT header (`roce_wire::int`): the packet as
/// without it, then the header.
fn write_int_packet(f: &mut fmt::Formatter<'_>, payload: &[u8]) -> fmt::Result {
    let mut rest = Vec::new();
    match int::strip(payload, &mut rest) {
        Ok(header) => {
            match RocePacket::new_checked(&rest[..]) {
                Ok(packet) => write_roce(f, &packet)?,
                Err(err) => write!(f, " RoCE malformed: {err}")?,
            }
            write!(f, " {}", Int(&header))
        }
        Err(err) => write!(f, " INT malformed: {err}"),
    }
}

/// Displays an INT header: `int(hops=2 q=1200B/100G q=0B/400G)`, `int-echo(...)` for the copy a
/// responder sends back; each record's queue length and line rate. A PINT header:
/// `pint(value=627)`, `pint-echo(value=627)` (the encoded utilisation: its log base is the
/// senders', which the packet does not carry).
#[derive(Debug, Clone, Copy)]
pub struct Int<'a>(pub &'a int::Repr);

impl fmt::Display for Int<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(value) = self.0.pint {
            let name = if self.0.echo { "pint-echo" } else { "pint" };
            return write!(f, "{name}(value={value})");
        }
        let name = if self.0.echo { "int-echo" } else { "int" };
        write!(f, "{name}(hops={}", self.0.hops().len())?;
        for hop in self.0.hops() {
            write!(
                f,
                " q={}B/{}G",
                hop.qlen_bytes(),
                hop.line_rate_bps() / 1_000_000_000
            )?;
        }
        f.write_str(")")
    }
}

/// The RoCE part of a packet of which only the first `captured` bytes are real.
fn write_cut_short(f: &mut fmt::Formatter<'_>, payload: &[u8], captured: usize) -> fmt::Result {
    let len = payload.len();
    let captured = captured.min(len);
    let packet = RocePacket::new_checked(payload);
    let repr = packet.as_ref().ok().map(RoceRepr::parse);
    match (&packet, repr) {
        // Of a packet with INT only the BTH is shown: its other headers lie behind the INT one.
        (Ok(packet), Some(Ok(repr)))
            if captured >= packet.payload_offset() && !int::flagged(payload) =>
        {
            write!(f, " {}", Roce(&repr))?;
            if let Some(mad) = gsi::mad_of(packet)
                && captured >= packet.payload_offset() + mad.len()
            {
                write!(f, " {}", Mad(mad))?;
            }
        }
        _ if captured >= crate::bth::HEADER_LEN => {
            let bth = crate::bth::Packet::new_unchecked(payload);
            write!(
                f,
                " {} qp={} psn={} (headers cut short)",
                bth.opcode(),
                bth.dest_qp(),
                bth.psn()
            )?;
        }
        _ => f.write_str(" RoCE")?,
    }
    write!(
        f,
        " icrc=unchecked (cut short by the capture: {captured} of {len} bytes)"
    )
}

/// Displays the MAD of a GSI packet: a CM MAD in one line (`CM REQ tid=… lcid=… sid=…`), another
/// class by its numbers, or why it did not parse.
#[derive(Debug, Clone, Copy)]
pub struct Mad<'a>(pub &'a [u8]);

impl fmt::Display for Mad<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match CmMad::parse(self.0) {
            Ok(mad) => write!(f, "{mad}"),
            Err(ParseError::NotCm {
                mgmt_class,
                class_version,
            }) => {
                let attr = mad::Packet::new_checked(self.0)
                    .map(|h| h.attr_id())
                    .unwrap_or(0);
                write!(
                    f,
                    "MAD class={mgmt_class:#04x} version={class_version} attr={attr:#06x}"
                )
            }
            Err(err) => write!(f, "CM malformed: {err}"),
        }
    }
}

/// `addr:port`, with brackets around IPv6 addresses.
struct Endpoint(std::net::IpAddr, Option<u16>);

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (std::net::IpAddr::V6(v6), Some(port)) => write!(f, "[{v6}]:{port}"),
            (ip, Some(port)) => write!(f, "{ip}:{port}"),
            (ip, None) => write!(f, "{ip}"),
        }
    }
}

const ETHERTYPE_ARP: u16 = 0x0806;
