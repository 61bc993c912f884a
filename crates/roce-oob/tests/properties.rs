//! Decoders never panic on arbitrary input, and encode/decode round trip.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use proptest::prelude::*;
use roce_oob::perftest::{self, BwReport, IbvMtu, PerftestDest};
use roce_oob::pingpong::{self, Dest};

fn dest() -> impl Strategy<Value = Dest> {
    (
        any::<u16>(),
        0..=0xff_ffffu32,
        0..=0xff_ffffu32,
        any::<[u8; 16]>(),
    )
        .prop_map(|(lid, qpn, psn, gid)| Dest { lid, qpn, psn, gid })
}

fn perftest_dest() -> impl Strategy<Value = PerftestDest> {
    (
        (
            any::<u16>(),
            any::<u16>(),
            0..=0xff_ffffu32,
            0..=0xff_ffffu32,
        ),
        (
            any::<u32>(),
            any::<u64>(),
            any::<Option<[u8; 16]>>(),
            any::<u32>(),
        ),
    )
        .prop_map(
            |((lid, out_reads, qpn, psn), (rkey, vaddr, gid, srqn))| PerftestDest {
                lid,
                out_reads,
                qpn,
                psn,
                rkey,
                vaddr,
                gid,
                srqn,
            },
        )
}

proptest! {
    #[test]
    fn decoders_take_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..130)) {
        let _ = pingpong::decode(&bytes);
        let _ = perftest::decode_keys(&bytes, true);
        let _ = perftest::decode_keys(&bytes, false);
        let _ = perftest::decode_version(&bytes);
        let _ = perftest::decode_mtu(&bytes);
    }

    #[test]
    fn near_misses_decode_only_to_what_they_say(d in perftest_dest(), at in 0usize..108, b in any::<u8>()) {
        // One byte changed in a valid message: either a typed error, or a value whose own
        // encoding is that message (up to the case of hex digits). Never a panic.
        let mut msg = perftest::encode_keys(&d);
        let at = at % msg.len();
        msg[at] = b;
        if let Ok(back) = perftest::decode_keys(&msg, d.gid.is_some()) {
            prop_assert_eq!(perftest::encode_keys(&back), msg.to_ascii_lowercase());
        }
        let mut msg = pingpong::encode(&Dest { lid: d.lid, qpn: d.qpn, psn: d.psn, gid: d.gid.unwrap_or_default() });
        let at = at % msg.len();
        msg[at] = b;
        if let Ok(back) = pingpong::decode(&msg) {
            prop_assert_eq!(pingpong::encode(&back).to_vec(), msg.to_ascii_lowercase());
        }
    }

    #[test]
    fn pingpong_round_trips(d in dest()) {
        let msg = pingpong::encode(&d);
        prop_assert_eq!(pingpong::decode(&msg).unwrap(), d);
    }

    #[test]
    fn perftest_keys_round_trip(d in perftest_dest()) {
        let msg = perftest::encode_keys(&d);
        let expected = if d.gid.is_some() { perftest::KEY_MSG_SIZE_GID } else { perftest::KEY_MSG_SIZE };
        prop_assert_eq!(msg.len(), expected);
        prop_assert_eq!(perftest::decode_keys(&msg, d.gid.is_some()).unwrap(), d);
    }

    #[test]
    fn reports_round_trip_bit_for_bit(bits in any::<[u64; 5]>()) {
        let parts = bits.map(u64::to_be_bytes);
        prop_assert_eq!(BwReport::decode(&parts).encode(), parts);
    }

    #[test]
    fn version_round_trips(v in "[0-9.a-z]{0,15}") {
        let msg = perftest::encode_version(&v).unwrap();
        prop_assert_eq!(perftest::decode_version(&msg).unwrap().text, v);
    }

    #[test]
    fn mtu_round_trips(v in 1u8..=5) {
        let mtu = IbvMtu::from_enum(v).unwrap();
        prop_assert_eq!(perftest::decode_mtu(&perftest::encode_mtu(mtu)).unwrap(), mtu);
    }
}
