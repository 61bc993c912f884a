//! Fuzz harnesses. Each takes arbitrary bytes and checks the crate's contract on them: no panic,
//! and whatever parses re-emits to the same `Repr`. The `cargo fuzz` targets call these, and the
//! unit tests run them over a committed corpus and over proptest's inputs, so CI exercises them
//! without a nightly toolchain.

use crate::frame::{Frame, LinkType};
use crate::opcode::Headers;
use crate::pretty::FrameLine;
use crate::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, FethRepr, IethRepr, ImmDtRepr,
    Opcode, Psn, Qpn, RethRepr, RocePacket, RoceRepr, Syndrome,
};

/// A RoCEv2 UDP payload: parse it, and if it parses, emit it again and parse that.
pub fn parse_packet(data: &[u8]) {
    let Ok(packet) = RocePacket::new_checked(data) else {
        return;
    };
    let repr = RoceRepr::parse(&packet).expect("a checked packet parses");
    let mut buf = vec![0; repr.buffer_len()];
    repr.emit(&mut buf, |payload| {
        payload.copy_from_slice(packet.payload())
    })
    .expect("a parsed repr emits");
    let again = RoceRepr::parse(&RocePacket::new_checked(&buf[..]).expect("emitted packets check"))
        .expect("emitted packets parse");
    assert_eq!(repr, again, "re-emitted packet differs");
    assert_eq!(
        RocePacket::new_unchecked(&buf[..]).payload(),
        packet.payload()
    );
}

/// An Ethernet frame (the first byte picks the link type): parse it, check its ICRC and print it,
/// whole and as if cut short.
pub fn parse_frame(data: &[u8]) {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let link = match selector % 4 {
        0 => LinkType::Ethernet,
        1 => LinkType::LinuxSll,
        2 => LinkType::LinuxSll2,
        _ => LinkType::RawIp,
    };
    if let Ok(frame) = Frame::parse(link, bytes) {
        let _ = frame.verify_icrc();
        let _ = frame.pseudo_header();
        if let Some(segments) = frame.gso_segments() {
            for segment in segments.iter() {
                let _ = segment.verify_icrc();
                assert!(!FrameLine::new(&segment).to_string().is_empty());
            }
        }
        let line = FrameLine::new(&frame).to_string();
        assert!(!line.is_empty());
        // As if a snap length had cut the RoCE packet anywhere (`roce dump` zero-fills the rest).
        for captured in [0, 11, 12, usize::from(selector / 4), usize::MAX] {
            assert!(
                !FrameLine::cut_short(&frame, captured)
                    .to_string()
                    .is_empty()
            );
        }
    }
}

/// A value for every field an extension header may carry: what a property test draws, to build
/// a [`RoceRepr`] of any opcode with [`repr_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FieldValues {
    /// The BTH's SE, MigReq, FECN, BECN and AckReq, in that order.
    pub flags: [bool; 5],
    /// The BTH P_Key.
    pub pkey: u16,
    /// The BTH DestQP (its low 24 bits are used).
    pub dest_qp: u32,
    /// The BTH PSN (its low 24 bits are used).
    pub psn: u32,
    /// FETH placement type (its low 4 bits are used).
    pub placement_type: u8,
    /// FETH selectivity level (its low 2 bits are used).
    pub selectivity_level: u8,
    /// DETH Q_Key.
    pub qkey: u32,
    /// DETH source QP and immediate data.
    pub imm: u32,
    /// The AETH syndrome byte.
    pub syndrome: u8,
    /// The AETH MSN (its low 24 bits are used).
    pub msn: u32,
    /// RETH and AtomicETH virtual address.
    pub va: u64,
    /// RETH, AtomicETH and IETH R_Key.
    pub rkey: u32,
    /// RETH DMA length.
    pub dma_len: u32,
    /// AtomicETH swap or add data.
    pub swap_add: u64,
    /// AtomicETH compare and AtomicAckETH original data.
    pub compare: u64,
    /// Payload bytes.
    pub payload_len: usize,
}

/// The repr of `opcode` with exactly the extension headers of `headers` (its opcode table row),
/// each filled from `v`, and the pad `v.payload_len` needs.
pub fn repr_with(opcode: Opcode, headers: Headers, v: &FieldValues) -> RoceRepr {
    let mut bth = BthRepr::new(opcode, Qpn::new(v.dest_qp), Psn::new(v.psn));
    [
        bth.solicited_event,
        bth.mig_req,
        bth.fecn,
        bth.becn,
        bth.ack_req,
    ] = v.flags;
    bth.pkey = v.pkey;
    bth.pad_count = RoceRepr::pad_for(v.payload_len);
    let h = headers;
    RoceRepr {
        bth,
        feth: h.feth.then_some(FethRepr {
            placement_type: v.placement_type & 0xf,
            selectivity_level: v.selectivity_level & 3,
        }),
        deth: h.deth.then_some(DethRepr {
            qkey: v.qkey,
            src_qp: Qpn::new(v.imm),
        }),
        reth: h.reth.then_some(RethRepr {
            va: v.va,
            rkey: v.rkey,
            dma_len: v.dma_len,
        }),
        atomic_eth: h.atomic_eth.then_some(AtomicEthRepr {
            va: v.va,
            rkey: v.rkey,
            swap_add: v.swap_add,
            compare: v.compare,
        }),
        aeth: h.aeth.then_some(AethRepr {
            syndrome: Syndrome::from(v.syndrome),
            msn: v.msn & 0x00ff_ffff,
        }),
        atomic_ack_eth: h.atomic_ack_eth.then_some(AtomicAckEthRepr {
            orig_data: v.compare,
        }),
        immdt: h.immdt.then_some(ImmDtRepr { imm_data: v.imm }),
        ieth: h.ieth.then_some(IethRepr { rkey: v.rkey }),
        payload_len: v.payload_len,
    }
}

/// A MAD: parse it as a CM MAD, and if it parses, emit it again, parse that, and print it.
pub fn parse_cm_mad(data: &[u8]) {
    let Ok(mad) = crate::CmMad::parse(data) else {
        return;
    };
    let mut buf = [0; crate::mad::MAD_LEN];
    mad.emit(&mut buf).expect("a parsed MAD emits");
    let again = crate::CmMad::parse(&buf).expect("an emitted MAD parses");
    assert_eq!(mad, again, "re-emitted MAD differs");
    assert!(mad.to_string().starts_with("CM "));
}
