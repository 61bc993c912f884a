use proptest::prelude::*;

use super::*;
use crate::aeth::{CreditCode, RnrTimer};
use crate::fuzzing::{FieldValues, repr_with};
use crate::opcode::Layout;
use crate::{NakCode, Opcode, Psn, Qpn, Syndrome};

/// ibv_rc_pingpong's first SEND_ONLY of `mtu1500-rc_s64_m1024.pcap`, payload shortened to 6 bytes
/// (pad 2), ICRC slot zero.
static SEND_ONLY: [u8; 12 + 6 + 2 + 4] = [
    0x04, 0x20, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x76, 0x55, 0x43, // BTH, PadCnt 2
    b'p', b'i', b'n', b'g', b'!', b'\n', // payload
    0x00, 0x00, // pad
    0x00, 0x00, 0x00, 0x00, // ICRC
];

/// An rxe ACK: BTH, AETH `1f 00 00 0a`.
static ACK: [u8; 12 + 4 + 4] = [
    0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x42, 0x57, 0x7c, // BTH
    0x1f, 0x00, 0x00, 0x0a, // AETH: ACK, unlimited credits, MSN 10
    0x00, 0x00, 0x00, 0x00, // ICRC
];

#[test]
fn send_only_deconstruct() {
    let packet = Packet::new_checked(&SEND_ONLY[..]).unwrap();
    assert_eq!(packet.layout().name, "RC_SEND_ONLY");
    assert_eq!(packet.payload(), b"ping!\n");
    assert_eq!(packet.pad(), [0, 0]);
    assert!(packet.reth().is_none() && packet.aeth().is_none());
    let repr = Repr::parse(&packet).unwrap();
    assert_eq!(repr.payload_len, 6);
    assert_eq!(repr.bth.pad_count, 2);
    assert!(repr.bth.ack_req);
}

#[test]
fn send_only_construct() {
    let mut bth = BthRepr::new(Opcode::RcSendOnly, Qpn::new(0x11), Psn::new(0x765543));
    bth.ack_req = true;
    bth.pad_count = Repr::pad_for(6);
    let repr = Repr {
        payload_len: 6,
        ..Repr::new(bth)
    };
    let mut buf = vec![0xee; repr.buffer_len()];
    repr.emit(&mut buf, |p| p.copy_from_slice(b"ping!\n"))
        .unwrap();
    assert_eq!(buf, SEND_ONLY);
}

#[test]
fn ack_deconstruct() {
    let packet = Packet::new_checked(&ACK[..]).unwrap();
    let repr = Repr::parse(&packet).unwrap();
    assert_eq!(repr.aeth, Some(AethRepr::ack(10)));
    assert_eq!(repr.bth.psn, Psn::new(0x42577c));
    assert_eq!(packet.payload(), b"");
}

#[test]
fn errors_come_in_wire_order() {
    // Shorter than a BTH.
    let err = Packet::new_checked(&ACK[..11]).unwrap_err();
    assert_eq!(
        err,
        ParseError::Truncated {
            layer: Layer::Bth,
            need: 12,
            got: 11
        }
    );

    // TVer is checked before the opcode.
    let mut bad = ACK;
    bad[0] = 0x40; // RD: not supported
    bad[1] = 0x03; // TVer 3
    assert_eq!(
        Packet::new_checked(&bad[..]).unwrap_err(),
        ParseError::BadTver(3)
    );
    bad[1] = 0;
    assert_eq!(
        Packet::new_checked(&bad[..]).unwrap_err(),
        ParseError::UnsupportedOpcode(0x40)
    );

    // A BTH with no room for the ICRC.
    let err = Packet::new_checked(&ACK[..14]).unwrap_err();
    assert_eq!(
        err,
        ParseError::Truncated {
            layer: Layer::Icrc,
            need: 16,
            got: 14
        }
    );

    // The AETH cut short: the last 4 bytes are always the ICRC.
    let err = Packet::new_checked(&ACK[..18]).unwrap_err();
    assert_eq!(
        err,
        ParseError::Truncated {
            layer: Layer::Aeth,
            need: 20,
            got: 18
        }
    );

    // Pad count larger than what is between headers and ICRC.
    let mut bad = ACK;
    bad[1] = 0x10;
    assert_eq!(
        Packet::new_checked(&bad[..]).unwrap_err(),
        ParseError::BadPad {
            pad: 1,
            available: 0
        }
    );

    // An ACK with a payload.
    let mut long = ACK.to_vec();
    long.extend_from_slice(&[0; 4]);
    let err = Packet::new_checked(&long[..]).unwrap_err();
    assert_eq!(
        err,
        ParseError::BadPayloadLength {
            opcode: 0x11,
            expected: 0,
            got: 4
        }
    );
}

#[test]
fn fixed_payload_opcodes_carry_no_pad() {
    // ATOMIC WRITE carries exactly 8 bytes: 6 bytes and a pad of 2 are not 8 bytes.
    let mut bytes = vec![0x1d, 0x20, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 1];
    bytes.extend_from_slice(&[0; 16]); // RETH
    bytes.extend_from_slice(&[0; 8]); // 6 bytes of payload, 2 of pad
    bytes.extend_from_slice(&[0; 4]); // ICRC
    let err = Packet::new_checked(&bytes[..]).unwrap_err();
    assert_eq!(
        err,
        ParseError::BadPayloadLength {
            opcode: 0x1d,
            expected: 8,
            got: 6
        }
    );
    bytes[1] = 0;
    assert!(Packet::new_checked(&bytes[..]).is_ok());
}

#[test]
fn write_only_with_immediate_has_reth_then_immdt() {
    let mut bth = BthRepr::new(
        Opcode::RcRdmaWriteOnlyWithImmediate,
        Qpn::new(7),
        Psn::new(1),
    );
    bth.pad_count = Repr::pad_for(3);
    let repr = Repr {
        reth: Some(RethRepr {
            va: 0x1000,
            rkey: 0x42,
            dma_len: 3,
        }),
        immdt: Some(ImmDtRepr {
            imm_data: 0xcafe_f00d,
        }),
        payload_len: 3,
        ..Repr::new(bth)
    };
    let mut buf = vec![0; repr.buffer_len()];
    assert_eq!(buf.len(), 12 + 16 + 4 + 3 + 1 + 4);
    repr.emit(&mut buf, |p| p.copy_from_slice(b"abc")).unwrap();
    assert_eq!(&buf[28..32], &[0xca, 0xfe, 0xf0, 0x0d]);
    assert_eq!(&buf[32..35], b"abc");
    let packet = Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(packet.reth().unwrap().rkey(), 0x42);
    assert_eq!(packet.immdt().unwrap().imm_data(), 0xcafe_f00d);
    assert_eq!(Repr::parse(&packet).unwrap(), repr);
}

#[test]
fn emit_rejects_misuse() {
    let bth = BthRepr::new(Opcode::RcRdmaWriteFirst, Qpn::new(7), Psn::new(1));
    let mut buf = [0; 64];
    let missing = Repr::new(bth).emit(&mut buf, |_| {});
    let expected = EmitError::MissingHeader {
        opcode: 0x06,
        layer: Layer::Reth,
    };
    assert_eq!(missing, Err(expected));

    let ack = Repr {
        aeth: Some(AethRepr::ack(0)),
        immdt: Some(ImmDtRepr { imm_data: 1 }),
        ..Repr::new(BthRepr::new(
            Opcode::RcAcknowledge,
            Qpn::new(7),
            Psn::new(1),
        ))
    };
    let unexpected = ack.emit(&mut buf, |_| {});
    let expected = EmitError::UnexpectedHeader {
        opcode: 0x11,
        layer: Layer::ImmDt,
    };
    assert_eq!(unexpected, Err(expected));

    let ack = Repr {
        immdt: None,
        payload_len: 4,
        ..ack
    };
    let err = ack.emit(&mut buf, |_| {});
    assert_eq!(
        err,
        Err(EmitError::PayloadLength {
            opcode: 0x11,
            len: 4
        })
    );

    let ack = Repr {
        payload_len: 0,
        ..ack
    };
    let err = ack.emit(&mut buf, |_| {});
    assert_eq!(err, Err(EmitError::BufferLength { need: 20, got: 64 }));

    let unknown = Repr::new(BthRepr::new(
        Opcode::Unknown(0x40),
        Qpn::new(7),
        Psn::new(1),
    ));
    assert_eq!(
        unknown.emit(&mut buf, |_| {}),
        Err(EmitError::UnsupportedOpcode(0x40))
    );
}

#[test]
fn cnp_is_bth_and_sixteen_zero_bytes() {
    let repr = Repr::new(cnp::bth(Qpn::new(0x118)));
    assert_eq!(repr.buffer_len(), 12 + 16 + 4);
    let mut buf = vec![0xaa; repr.buffer_len()];
    repr.emit(&mut buf, |_| {}).unwrap();
    assert_eq!(&buf[12..], &[0; 20]);
}

#[test]
fn naks_and_rnr_naks() {
    for syndrome in [
        Syndrome::Nak(NakCode::PsnSeqErr),
        Syndrome::Nak(NakCode::RemoteAccessError),
        Syndrome::RnrNak {
            timer: RnrTimer::new(12),
        },
        Syndrome::Ack {
            credits: CreditCode::new(3),
        },
    ] {
        let repr = Repr {
            aeth: Some(AethRepr {
                syndrome,
                msn: 0x00ab_cdef,
            }),
            ..Repr::new(BthRepr::new(
                Opcode::RcAcknowledge,
                Qpn::new(1),
                Psn::new(2),
            ))
        };
        let mut buf = vec![0; repr.buffer_len()];
        repr.emit(&mut buf, |_| {}).unwrap();
        let parsed = Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap();
        assert_eq!(parsed, repr);
    }
}

/// An arbitrary `Repr` for `opcode` that obeys the opcode table.
fn arb_repr(opcode: Opcode) -> impl Strategy<Value = Repr> {
    let layout: Layout = opcode.layout().unwrap();
    let payload_len = match layout.payload {
        PayloadRule::None => Just(0usize).boxed(),
        PayloadRule::Fixed(n) => Just(n).boxed(),
        PayloadRule::Mtu => Just(256usize).boxed(),
        PayloadRule::OneToMtu => (1usize..=300).boxed(),
        PayloadRule::UpToMtu => (0usize..=300).boxed(),
    };
    (
        (any::<[bool; 5]>(), any::<u16>(), any::<u32>(), any::<u32>()),
        payload_len,
        (
            any::<u8>(),
            any::<u8>(),
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
        ),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
        ),
    )
        .prop_map(move |((flags, pkey, qpn, psn), payload_len, small, big)| {
            let (plt, sel, qkey, imm, syndrome) = small;
            let (va, rkey, len, swap, cmp) = big;
            let values = FieldValues {
                flags,
                pkey,
                dest_qp: qpn,
                psn,
                placement_type: plt,
                selectivity_level: sel,
                qkey,
                imm,
                syndrome,
                msn: len,
                va,
                rkey,
                dma_len: len,
                swap_add: swap,
                compare: cmp,
                payload_len,
            };
            repr_with(opcode, layout.headers, &values)
        })
}

proptest! {
    #[test]
    fn every_opcode_round_trips(
        repr in proptest::sample::select(Opcode::ALL).prop_flat_map(arb_repr),
        fill in any::<u8>(),
    ) {
        let mut buf = vec![0; repr.buffer_len()];
        repr.emit(&mut buf, |p| p.fill(fill)).unwrap();
        let packet = Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Repr::parse(&packet).unwrap(), repr);
        prop_assert!(packet.payload().iter().all(|&b| b == fill));
        prop_assert_eq!(packet.payload().len(), repr.payload_len);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        crate::fuzzing::parse_packet(&data);
        crate::fuzzing::parse_frame(&data);
    }

    #[test]
    fn valid_bth_arbitrary_rest_never_panics(
        opcode in proptest::sample::select(Opcode::ALL),
        flags in any::<u8>(),
        rest in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        let mut data = vec![u8::from(opcode), flags & 0xf0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 1];
        data.extend_from_slice(&rest);
        crate::fuzzing::parse_packet(&data);
    }
}

/// Every header of every opcode is found (in the compile-time table of offsets) where the walk
/// over the layout in wire order puts it, and a header the opcode lacks is not found.
#[test]
fn the_header_offset_table_agrees_with_the_wire_order_walk_for_every_opcode() {
    let layers = [
        Layer::Feth,
        Layer::Deth,
        Layer::Reth,
        Layer::AtomicEth,
        Layer::Aeth,
        Layer::AtomicAckEth,
        Layer::ImmDt,
        Layer::Ieth,
        Layer::CnpReserved,
    ];
    let mut checked = 0;
    for opcode in 0..=u8::MAX {
        let Some(layout) = opcode::layout_of(opcode) else {
            continue;
        };
        let mut walked = Vec::new();
        let mut offset = bth::HEADER_LEN;
        for (layer, len) in present(&layout.headers) {
            walked.push((layer, offset, len));
            offset += len;
        }
        for layer in layers {
            let expected = walked
                .iter()
                .find(|(l, _, _)| *l == layer)
                .map(|&(_, offset, len)| (offset, len));
            let found = extension_index(layer).and_then(|i| opcode::extension_at(opcode, i));
            assert_eq!(found, expected, "{} {layer:?}", layout.name);
            checked += usize::from(expected.is_some());
        }
    }
    // Not vacuous: RC, UC and UD opcodes carry 32 extension headers between them.
    assert_eq!(checked, 32);
    // No place for a layer that is no extension header, nor for an unknown opcode.
    assert_eq!(extension_index(Layer::Bth), None);
    assert_eq!(opcode::extension_at(0xff, 2), None);
}
