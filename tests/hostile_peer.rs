//! A hostile peer against one NIC: hand-built RoCEv2 packets that spoof side a of a connected
//! pair and aim at side b's QP and memory, or at its QP 1. Every one is dropped or refused
//! before a byte of b's memory changes, and counted under its name; a MAD no agent takes
//! queues nothing.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use roce_core::{
    Congestion, Datagram, DcqcnConfig, Ecn, IcrcPolicy, Instant, MAX_DATAGRAM, Nic, NicConfig,
    QpState, SendOp, WcStatus,
};
use roce_sim::{A_ADDR, B_ADDR, Pair, PairConfig};
use roce_tests::sim::{post, remote, wr};
use roce_wire::{
    AtomicEthRepr, BthRepr, Opcode, PseudoHeader, Psn, Qpn, RethRepr, RoceRepr, cnp, icrc,
};

/// The UDP source port the spoofed packets claim (our UDP backend's).
const SPORT: u16 = 4791;

/// A pair whose b side is the target; b's responder expects PSN 0 from a.
fn target(nic: NicConfig) -> Pair {
    Pair::connected(&PairConfig {
        nic,
        ..PairConfig::default()
    })
}

/// A request from a's QP to b's, with `payload` (pad added as a sender would).
fn request(pair: &Pair, opcode: Opcode, psn: u32, payload_len: usize) -> RoceRepr {
    let mut bth = BthRepr::new(opcode, pair.b.qpn, Psn::new(psn));
    bth.ack_req = true;
    bth.pad_count = RoceRepr::pad_for(payload_len);
    RoceRepr {
        payload_len,
        ..RoceRepr::new(bth)
    }
}

/// `repr` as bytes, its ICRC sealed for `src` → b with IPv4 ID `ip_id`.
fn emit(repr: &RoceRepr, payload: u8, src: IpAddr, ip_id: u16) -> Vec<u8> {
    let mut buf = vec![0; repr.buffer_len()];
    repr.emit(&mut buf, |p| p.fill(payload)).unwrap();
    let header = PseudoHeader::for_datagram(
        SocketAddr::new(src, SPORT),
        SocketAddr::new(B_ADDR, 4791),
        ip_id,
    )
    .unwrap();
    icrc::seal(&header, &mut buf);
    buf
}

/// Hands `bytes` to b as a UDP socket would (the IPv4 ID unseen), from `src`.
fn deliver(pair: &mut Pair, src: IpAddr, bytes: &[u8]) {
    pair.b.nic.handle_datagram(
        pair.now,
        Datagram {
            src: SocketAddr::new(src, SPORT),
            dst: SocketAddr::new(B_ADDR, 4791),
            ecn: Ecn::NotEct,
            ip_id: None,
            segment: 0,
            payload: bytes,
        },
    );
}

/// b's whole region, to compare before and after.
fn memory(pair: &Pair) -> Vec<u8> {
    pair.b.mr.read(0, pair.b.mr.len()).unwrap()
}

/// What b sends next, if anything.
fn b_sends(pair: &mut Pair) -> Option<Vec<u8>> {
    let mut buf = vec![0; MAX_DATAGRAM];
    let t = pair.b.nic.poll_transmit(pair.now, &mut buf)?;
    buf.truncate(t.len);
    Some(buf)
}

fn write_only(pair: &Pair, dma_len: u32, carried: usize) -> RoceRepr {
    RoceRepr {
        reth: Some(RethRepr {
            va: pair.b.mr.addr(),
            rkey: pair.b.mr.rkey(),
            dma_len,
        }),
        ..request(pair, Opcode::RcRdmaWriteOnly, 0, carried)
    }
}

#[test]
//= rxe:rxe_icrc.c/rxe_icrc_check
fn write_read_and_fetch_add_with_a_corrupted_icrc_are_dropped_on_the_udp_backend() {
    let mut pair = target(NicConfig::default());
    pair.b.mr.write(0, &[7; 64]);
    let before = memory(&pair);
    let read = RoceRepr {
        reth: Some(RethRepr {
            va: pair.b.mr.addr(),
            rkey: pair.b.mr.rkey(),
            dma_len: 64,
        }),
        ..request(&pair, Opcode::RcRdmaReadRequest, 1, 0)
    };
    let fetch_add = RoceRepr {
        atomic_eth: Some(AtomicEthRepr {
            va: pair.b.mr.addr(),
            rkey: pair.b.mr.rkey(),
            swap_add: 1,
            compare: 0,
        }),
        ..request(&pair, Opcode::RcFetchAdd, 2, 0)
    };
    // Sealed as our UDP backend seals (ID 0), then the ICRC xored with 0xa5a5a5a5.
    for repr in [write_only(&pair, 64, 64), read, fetch_add] {
        let mut bytes = emit(&repr, 0xee, A_ADDR, 0);
        let end = bytes.len();
        for b in &mut bytes[end - 4..] {
            *b ^= 0xa5;
        }
        deliver(&mut pair, A_ADDR, &bytes);
    }
    let stats = pair.b.nic.stats();
    assert_eq!(
        (stats.rx_icrc_errors, stats.rx_accepted),
        (3, 0),
        "{stats:?}"
    );
    assert_eq!(memory(&pair), before, "nothing landed");
    assert_eq!(b_sends(&mut pair), None, "no ACK, no READ response");
    assert_eq!(pair.b.qp_state(), QpState::Rts);
}

#[test]
fn an_intact_packet_with_an_unseen_nonzero_ipv4_id_is_accepted_as_rxe_sends_them() {
    let mut pair = target(NicConfig::default());
    // rxe counts its IDs up: 0x4c1d is what a UDP socket never shows.
    let bytes = emit(&write_only(&pair, 64, 64), 0xee, A_ADDR, 0x4c1d);
    deliver(&mut pair, A_ADDR, &bytes);
    let stats = pair.b.nic.stats();
    assert_eq!((stats.rx_accepted, stats.rx_icrc_id_solved), (1, 1));
    assert_eq!(pair.b.mr.read(0, 64).unwrap(), [0xee; 64]);
}

#[test]
//= rxe:rxe_resp.c/check_rkey
fn a_write_only_whose_reth_length_exceeds_its_payload_lands_nothing() {
    let mut pair = target(NicConfig::default());
    let before = memory(&pair);
    // RETH DMA length 128, 64 bytes carried, a valid ICRC.
    let bytes = emit(&write_only(&pair, 128, 64), 0xee, A_ADDR, 0);
    deliver(&mut pair, A_ADDR, &bytes);
    assert_eq!(memory(&pair), before, "nothing landed");
    assert_eq!(
        pair.b.nic.stats().tx_naks_other,
        1,
        "an invalid-request NAK"
    );
    assert!(b_sends(&mut pair).is_some());
    assert_eq!(pair.b.qp_state(), QpState::Err);
}

#[test]
fn a_write_first_of_a_message_that_fits_one_packet_lands_nothing() {
    let mut pair = target(NicConfig::default());
    let before = memory(&pair);
    // 1024 bytes fit one packet at path MTU 1024: a FIRST of it announces a LAST that cannot
    // carry a byte.
    let mut repr = write_only(&pair, 1024, 1024);
    repr.bth.opcode = Opcode::RcRdmaWriteFirst;
    deliver(&mut pair, A_ADDR, &emit(&repr, 0xee, A_ADDR, 0));
    assert_eq!(memory(&pair), before, "nothing landed");
    assert_eq!(pair.b.qp_state(), QpState::Err);
}

#[test]
//= rxe:rxe_resp.c/check_rkey
fn a_write_last_carrying_more_than_remains_lands_none_of_its_bytes() {
    let mut pair = target(NicConfig::default());
    // FIRST: a full MTU of a 1034-byte message, which lands.
    let mut first = write_only(&pair, 1034, 1024);
    first.bth.opcode = Opcode::RcRdmaWriteFirst;
    deliver(&mut pair, A_ADDR, &emit(&first, 0x11, A_ADDR, 0));
    assert_eq!(pair.b.mr.read(0, 1024).unwrap(), [0x11; 1024]);
    // LAST: 20 bytes where 10 remain.
    let last = request(&pair, Opcode::RcRdmaWriteLast, 1, 20);
    let before = memory(&pair);
    deliver(&mut pair, A_ADDR, &emit(&last, 0x22, A_ADDR, 0));
    assert_eq!(memory(&pair), before, "none of the LAST landed");
    assert_eq!(pair.b.qp_state(), QpState::Err);
}

#[test]
//= rxe:rxe_recv.c/rxe_rcv
fn a_truncated_write_only_is_dropped_by_its_icrc_and_refused_by_its_length_without_one() {
    for icrc in [IcrcPolicy::Check, IcrcPolicy::Skip] {
        let mut pair = target(NicConfig {
            icrc,
            ..NicConfig::default()
        });
        let before = memory(&pair);
        // 12 BTH + 16 RETH + 64 payload + 4 ICRC = 96 bytes, cut to 95.
        let mut bytes = emit(&write_only(&pair, 64, 64), 0xee, A_ADDR, 0);
        assert_eq!(bytes.len(), 96);
        bytes.truncate(95);
        deliver(&mut pair, A_ADDR, &bytes);
        assert_eq!(memory(&pair), before, "{icrc:?}: nothing landed");
        let stats = pair.b.nic.stats();
        match icrc {
            IcrcPolicy::Check => {
                assert_eq!((stats.rx_icrc_errors, stats.rx_accepted), (1, 0));
                assert_eq!(pair.b.qp_state(), QpState::Rts);
            }
            _ => assert_eq!(pair.b.qp_state(), QpState::Err, "refused by its length"),
        }
    }
}

#[test]
//= ibta:annex17/A17.9.3
fn cnps_from_anyone_but_the_qps_peer_do_not_slow_it_down() {
    let line_rate = 100_000_000_000;
    let mut pair = target(NicConfig {
        congestion: Congestion::Dcqcn(DcqcnConfig::default()),
        line_rate_bps: line_rate,
        ..NicConfig::default()
    });
    let rate = |pair: &Pair| {
        pair.b
            .nic
            .qp_congestion(pair.b.qpn, pair.now)
            .unwrap()
            .rate_bps
            .unwrap()
    };
    let stranger = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 99));
    let to_b = emit(&RoceRepr::new(cnp::bth(pair.b.qpn)), 0, stranger, 0);
    let to_nobody = emit(&RoceRepr::new(cnp::bth(Qpn::new(0xabcd))), 0, A_ADDR, 0);
    for _ in 0..2000 {
        deliver(&mut pair, stranger, &to_b);
        deliver(&mut pair, A_ADDR, &to_nobody);
    }
    let stats = pair.b.nic.stats();
    assert_eq!((stats.rx_path_mismatch, stats.rx_unknown_qp), (2000, 2000));
    assert_eq!((stats.rx_cnps, stats.rate_decreases), (0, 0));
    assert_eq!(rate(&pair), line_rate);
    // The QP's peer is heard.
    let from_peer = emit(&RoceRepr::new(cnp::bth(pair.b.qpn)), 0, A_ADDR, 0);
    deliver(&mut pair, A_ADDR, &from_peer);
    assert_eq!(pair.b.nic.stats().rx_cnps, 1);
    assert!(rate(&pair) < line_rate);
}

#[test]
fn keys_qpns_and_region_addresses_come_from_the_seed() {
    let first = |seed| {
        let mut nic = Nic::new(NicConfig {
            addrs: vec![B_ADDR],
            seed,
            ..NicConfig::default()
        });
        let pd = nic.alloc_pd();
        let cq = nic.create_cq(4);
        let mr = nic.reg_mr(pd, 4096, roce_core::Access::ALL).unwrap();
        let init = roce_core::QpInit::new(roce_core::QpType::Rc, pd, cq, 1);
        let qpn = nic.create_qp(&init).unwrap();
        (mr.rkey(), mr.addr(), qpn)
    };
    // One seed, one set of values: the engine stays deterministic.
    assert_eq!(first(7), first(7));
    let values: Vec<_> = (0..16).map(first).collect();
    for field in 0..3 {
        let distinct: std::collections::BTreeSet<u64> = values
            .iter()
            .map(|&(rkey, va, qpn)| [u64::from(rkey), va, u64::from(qpn.value())][field])
            .collect();
        assert!(distinct.len() >= 12, "field {field}: {values:x?}");
    }
    assert!(values.iter().all(|&(_, _, qpn)| qpn.value() >= 0x11));
}

#[test]
fn a_read_response_of_the_wrong_length_is_dropped_before_it_lands() {
    let mut pair = target(NicConfig::default());
    // a READs 2048 bytes of b: two responses at path MTU 1024, PSNs 0 and 1.
    let read = wr(&pair.a, 1, SendOp::RdmaRead(remote(&pair.b, 0)), 0, 2048);
    post(&mut pair, true, read);
    let mut buf = vec![0; MAX_DATAGRAM];
    assert!(
        pair.a.nic.poll_transmit(pair.now, &mut buf).is_some(),
        "the READ request"
    );
    let before = pair.a.mr.read(0, 4096).unwrap();
    // Spoofing b: an ONLY of 100 bytes, and a FIRST of 1000 (a FIRST is a full MTU).
    let mut responses = Vec::new();
    for (opcode, len) in [
        (Opcode::RcRdmaReadResponseOnly, 100),
        (Opcode::RcRdmaReadResponseFirst, 1000),
    ] {
        let mut bth = BthRepr::new(opcode, pair.a.qpn, Psn::new(0));
        bth.pad_count = RoceRepr::pad_for(len);
        let repr = RoceRepr {
            aeth: Some(roce_wire::AethRepr::ack(0)),
            payload_len: len,
            ..RoceRepr::new(bth)
        };
        let mut bytes = vec![0; repr.buffer_len()];
        repr.emit(&mut bytes, |p| p.fill(0xee)).unwrap();
        let header = PseudoHeader::for_datagram(
            SocketAddr::new(B_ADDR, SPORT),
            SocketAddr::new(A_ADDR, 4791),
            0,
        )
        .unwrap();
        icrc::seal(&header, &mut bytes);
        responses.push(bytes);
    }
    for bytes in &responses {
        pair.a.nic.handle_datagram(
            pair.now,
            Datagram {
                src: SocketAddr::new(B_ADDR, SPORT),
                dst: SocketAddr::new(A_ADDR, 4791),
                ecn: Ecn::NotEct,
                ip_id: None,
                segment: 0,
                payload: bytes,
            },
        );
    }
    assert_eq!(pair.a.nic.stats().rx_bad_responses, 2);
    assert_eq!(pair.a.mr.read(0, 4096).unwrap(), before, "nothing landed");
    assert_eq!(pair.a.completion(), None);
    // The READ still completes from b's real responses.
    pair.drive_until(Instant::from_millis(50));
    let cqe = pair.a.completion().expect("the READ completes");
    assert_eq!((cqe.wr_id, cqe.status), (1, WcStatus::Success));
}

/// A GSI packet to b's QP 1 carrying `mad`, sealed as a's.
fn gsi(mad: &[u8; roce_wire::mad::MAD_LEN]) -> Vec<u8> {
    let mut bytes = vec![0; roce_wire::mad::gsi::PACKET_LEN];
    let header = PseudoHeader::for_datagram(
        SocketAddr::new(A_ADDR, SPORT),
        SocketAddr::new(B_ADDR, 4791),
        0,
    )
    .unwrap();
    roce_wire::mad::gsi::emit(Psn::new(0), mad, &header, &mut bytes).unwrap();
    bytes
}

#[test]
//= rxe:mad.c/validate_mad
fn subnet_management_mads_to_qp1_are_dropped_and_queue_nothing_and_an_unmatched_get_is_answered() {
    let mut pair = target(NicConfig::default());
    pair.b.mr.write(0, &[7; 64]);
    let before = memory(&pair);
    // SubnGet(NodeInfo), LID-routed then directed-route, a thousand times: no agent ever
    // takes them on QP 1.
    let mut smp = [0u8; roce_wire::mad::MAD_LEN];
    smp[..4].copy_from_slice(&[1, 0x01, 1, 0x01]);
    smp[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
    for i in 0..1000 {
        smp[1] = if i % 2 == 0 { 0x01 } else { 0x81 };
        deliver(&mut pair, A_ADDR, &gsi(&smp));
    }
    let stats = pair.b.nic.stats();
    assert_eq!(
        (stats.rx_gsi_smp_class, stats.rx_accepted, stats.rx_gsi_mads),
        (1000, 0, 0),
        "{stats:?}"
    );
    assert_eq!(pair.b.nic.poll_gsi(), None, "nothing waits for an agent");
    assert_eq!(b_sends(&mut pair), None, "nothing answered");
    // A PerfMgmt Get (class 0x04): nobody serves it, so it is answered GetResp, status
    // 0x000c, the rest of the MAD as it came, to a's QP 1.
    let mut get = [0u8; roce_wire::mad::MAD_LEN];
    get[..4].copy_from_slice(&[1, 0x04, 1, 0x01]);
    get[8..16].copy_from_slice(&0xdead_beef_0000_0001u64.to_be_bytes());
    deliver(&mut pair, A_ADDR, &gsi(&get));
    let answer = b_sends(&mut pair).expect("the Get is answered");
    let packet = roce_wire::RocePacket::new_checked(&answer[..]).unwrap();
    assert_eq!(packet.bth().dest_qp(), Qpn::new(1));
    let mut expected = get;
    expected[3] = 0x81;
    expected[4..6].copy_from_slice(&[0x00, 0x0c]);
    assert_eq!(packet.payload(), &expected[..]);
    assert_eq!(b_sends(&mut pair), None, "once");
    assert_eq!(pair.b.nic.stats().gsi_unsupported_replies, 1);
    assert_eq!(memory(&pair), before, "nothing landed");
    assert_eq!(pair.b.qp_state(), QpState::Rts);
}
