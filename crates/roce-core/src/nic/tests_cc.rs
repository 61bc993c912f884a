//! Congestion control between two NICs, packet by packet: the ECN-Echo (BECN on ACKs) that
//! DCTCP reads, that no BECN or FECN bit is set otherwise, TIMELY's RTT from the ACKs'
//! arrival, and HPCC's INT header: on requests, stamped on the way, echoed by the ACKs.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::{
    Access, AddressVector, Congestion, Connect, Datagram, DcqcnConfig, DctcpConfig, Ecn,
    HpccConfig, Instant, MAX_DATAGRAM, Nic, NicConfig, Psn, QpInit, QpType, Remote, SendOp, SendWr,
    Sge, TimelyConfig,
};

const LINE: u64 = 10_000_000_000;
/// BTH byte 4 (IBA vol. 1 Annex A10): FECN is bit 7, BECN bit 6.
const FECN: u8 = 0x80;
const BECN: u8 = 0x40;
/// RC ACKNOWLEDGE.
const ACK: u8 = 0x11;

/// Two NICs with `congestion`, an RC QP on each connected to the other, and a region on each.
pub(super) struct Pair {
    pub(super) a: Nic,
    pub(super) b: Nic,
    pub(super) a_qp: crate::Qpn,
    pub(super) sge: Sge,
    pub(super) remote: Remote,
}

impl Pair {
    pub(super) fn new(congestion: Congestion) -> Self {
        Self::with(congestion, congestion)
    }

    /// A with `a_cc`, B with `b_cc`.
    fn with(a_cc: Congestion, b_cc: Congestion) -> Self {
        let (a_ip, b_ip) = (
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
        );
        let config = |ip, congestion| NicConfig {
            addrs: vec![ip],
            congestion,
            line_rate_bps: LINE,
            ..NicConfig::default()
        };
        let (mut a, mut b) = (Nic::new(config(a_ip, a_cc)), Nic::new(config(b_ip, b_cc)));
        let (a_pd, b_pd) = (a.alloc_pd(), b.alloc_pd());
        let (a_cq, b_cq) = (a.create_cq(64), b.create_cq(64));
        let a_mr = a.reg_mr(a_pd, 1 << 16, Access::ALL).unwrap();
        let b_mr = b.reg_mr(b_pd, 1 << 16, Access::ALL).unwrap();
        let a_qp = a
            .create_qp(&QpInit::new(QpType::Rc, a_pd, a_cq, 64))
            .unwrap();
        let b_qp = b
            .create_qp(&QpInit::new(QpType::Rc, b_pd, b_cq, 64))
            .unwrap();
        let zero = Psn::new(0);
        a.connect_qp(
            a_qp,
            &Connect::rc(AddressVector::new(a_ip, b_ip), b_qp, zero, zero),
        )
        .unwrap();
        b.connect_qp(
            b_qp,
            &Connect::rc(AddressVector::new(b_ip, a_ip), a_qp, zero, zero),
        )
        .unwrap();
        let sge = Sge {
            addr: a_mr.addr(),
            length: 0,
            lkey: a_mr.lkey(),
        };
        let remote = Remote {
            addr: b_mr.addr(),
            rkey: b_mr.rkey(),
        };
        Self {
            a,
            b,
            a_qp,
            sge,
            remote,
        }
    }

    /// A posts a WRITE of `len` bytes.
    fn write(&mut self, len: u32) {
        self.post(1, SendOp::RdmaWrite(self.remote), len);
    }

    /// A posts a READ of `len` bytes of B's region.
    fn read(&mut self, len: u32) {
        self.post(2, SendOp::RdmaRead(self.remote), len);
    }

    /// A posts `op` on `len` bytes of its region, as WR `wr_id`.
    fn post(&mut self, wr_id: u64, op: SendOp, len: u32) {
        let sge = Sge {
            length: len,
            ..self.sge
        };
        self.a
            .post_send(self.a_qp, SendWr::new(wr_id, op, sge))
            .unwrap();
    }
}

/// Everything `from` sends from `now` on, its pacing timers (due within 100 µs) run as they
/// come, delivered to `to` with the ECN codepoint `ecn(i)` for the i-th packet; the packets'
/// bytes and their ECN as sent. `now` ends at the last packet's time.
fn deliver(
    from: &mut Nic,
    to: &mut Nic,
    now: &mut Instant,
    ecn: impl Fn(usize) -> Ecn,
) -> Vec<(Vec<u8>, Ecn)> {
    let mut buf = vec![0; MAX_DATAGRAM];
    let mut sent = Vec::new();
    loop {
        let Some(t) = from.poll_transmit(*now, &mut buf) else {
            match from.poll_timeout() {
                Some(at) if at.as_nanos() <= now.as_nanos() + 100_000 => {
                    *now = at.max(*now);
                    from.handle_timeout(*now);
                    continue;
                }
                _ => break,
            }
        };
        let bytes = buf[..t.len].to_vec();
        to.handle_datagram(
            *now,
            Datagram {
                src: SocketAddr::new(t.src, t.src_port),
                dst: t.dst,
                ecn: ecn(sent.len()),
                ip_id: Some(0),
                segment: 0,
                payload: &bytes,
            },
        );
        sent.push((bytes, t.ecn));
    }
    sent
}

/// Without congestion control, and with DCQCN (which signals by CNPs), no packet either NIC
/// sends has BECN or FECN set, though every request arrives CE-marked: the wire is rxe's.
#[test]
fn no_becn_or_fecn_bit_is_set_unless_the_algorithm_echoes_marks() {
    for congestion in [Congestion::None, Congestion::Dcqcn(DcqcnConfig::default())] {
        let mut p = Pair::new(congestion);
        p.write(3000);
        p.write(1000);
        let mut now = Instant::ZERO;
        let requests = deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::Ce);
        let responses = deliver(&mut p.b, &mut p.a, &mut now, |_| Ecn::NotEct);
        assert_eq!(requests.len(), 4);
        let acks = responses.iter().filter(|(b, _)| b[0] == ACK).count();
        assert!(acks >= 1, "{congestion:?}: B acknowledged");
        for (bytes, _) in requests.iter().chain(&responses) {
            if bytes[0] == 0x81 {
                continue; // DCQCN's CNP carries BECN by definition (Annex A17.9.3)
            }
            assert_eq!(bytes[4] & (FECN | BECN), 0, "{congestion:?}: {bytes:02x?}");
        }
    }
}

/// DCQCN on a READ, whose data flows from the responder: the requester is the notification
/// point. READ responses leave ECN-capable; those that arrive CE-marked make A send one CNP (the CNPs' minimum gap
/// holds the rest back) to the peer's QP; B's reaction point cuts its rate by α/2 (α starts
/// at 1), and B's responses to the next READ leave paced at the half rate.
#[test]
fn ce_marked_read_responses_bring_a_cnp_that_paces_the_responder() {
    const READ: u32 = 16 * 1024;
    let mut p = Pair::new(Congestion::Dcqcn(DcqcnConfig::default()));
    p.read(READ);
    let mut now = Instant::ZERO;
    assert_eq!(
        deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::Ect0).len(),
        1
    );
    let responses = deliver(&mut p.b, &mut p.a, &mut now, |_| Ecn::Ce);
    assert!(responses.len() >= 4, "{} READ responses", responses.len());
    assert!(
        responses
            .iter()
            .all(|(b, ecn)| (0x0d..=0x10).contains(&b[0]) && *ecn == Ecn::Ect0),
        "READ responses, ECN-capable as requests are"
    );
    assert_eq!(p.b.stats().rate_decreases, 0);
    let from_a = deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::NotEct);
    let cnps = from_a.iter().filter(|(b, _)| b[0] == 0x81).count();
    assert_eq!(cnps, 1, "A's CNPs for the marked responses");
    assert_eq!(p.a.stats().tx_cnps, 1);
    assert_eq!(p.b.stats().rx_cnps, 1);
    assert_eq!(p.b.stats().rate_decreases, 1);

    // The next READ's responses, unmarked, leave at half the line rate: their bytes on the
    // wire take at least that long (at line rate they would take half as long).
    p.read(READ);
    deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::Ect0);
    let start = now;
    let responses = deliver(&mut p.b, &mut p.a, &mut now, |_| Ecn::Ect0);
    let wire: usize = responses
        .iter()
        .map(|(b, _)| b.len() + crate::cc::pacer::IPV4_FRAME_OVERHEAD)
        .sum();
    // The pacer lets the first packet go at once: the others wait for the ones before them.
    let last = responses
        .last()
        .map_or(0, |(b, _)| b.len() + crate::cc::pacer::IPV4_FRAME_OVERHEAD);
    let half_rate_ns = ((wire - last) as u64 * 8 * 1_000_000_000) / (LINE / 2);
    let took = now.as_nanos() - start.as_nanos();
    assert!(
        took >= half_rate_ns * 9 / 10,
        "{} responses of {wire} bytes on the wire took {took} ns; at half the line rate {half_rate_ns} ns",
        responses.len()
    );
}

/// DCTCP: requests carry ECT(0); B acknowledges a CE-marked request with BECN; the ACK reaches
/// A's DCTCP, which cuts the rate by α/2 (α starts at 1).
#[test]
fn becn_on_an_ack_reaches_dctcp() {
    let mut p = Pair::new(Congestion::Dctcp(DctcpConfig::default()));
    p.write(1000);
    let mut now = Instant::ZERO;
    let requests = deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::Ce);
    assert_eq!(requests[0].1, Ecn::Ect0, "DCTCP's requests are ECN-capable");
    assert_eq!(requests[0].0[4], 0, "requests carry no FECN");
    let responses = deliver(&mut p.b, &mut p.a, &mut now, |_| Ecn::NotEct);
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].0[0], ACK);
    assert_eq!(responses[0].0[4], BECN, "the ACK echoes CE");
    let state = p.a.qp_congestion(p.a_qp, now).unwrap();
    assert_eq!(state.rate_bps, Some(LINE / 2));
    assert_eq!(p.a.stats().rate_decreases, 1);

    // An unmarked request: an ACK without BECN, no cut.
    p.write(1000);
    deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::Ect0);
    let responses = deliver(&mut p.b, &mut p.a, &mut now, |_| Ecn::NotEct);
    assert_eq!(responses[0].0[4], 0);
    assert_eq!(p.a.stats().rate_decreases, 1);
}

/// DCTCP's ACK machine at a DCTCP responder whose peer asks for an ACK only at the end of a
/// message (a requester without congestion control): in a WRITE of three packets whose first
/// arrives unmarked and the others CE-marked, the first is acknowledged at once without BECN,
/// the last with BECN. (A DCTCP requester asks for an ACK of every packet.)
#[test]
fn a_change_of_ce_state_is_acknowledged_at_once() {
    let mut p = Pair::with(Congestion::None, Congestion::Dctcp(DctcpConfig::default()));
    p.write(3072);
    let mut now = Instant::ZERO;
    let requests = deliver(&mut p.a, &mut p.b, &mut now, |i| {
        if i == 0 { Ecn::Ect0 } else { Ecn::Ce }
    });
    assert_eq!(requests.len(), 3);
    let responses = deliver(&mut p.b, &mut p.a, &mut now, |_| Ecn::NotEct);
    let acks: Vec<(u32, u8)> = responses
        .iter()
        .map(|(b, _)| (u32::from_be_bytes([0, b[9], b[10], b[11]]), b[4]))
        .collect();
    assert_eq!(acks, vec![(0, 0), (2, BECN)]);
}

/// TIMELY: requests are Not-ECT; the RTT is the ACK's arrival minus the request's departure.
/// Two WRITEs each acknowledged 600 µs after it left (above T_high = 500 µs): the second
/// sample cuts the rate by β·(1 − T_high/RTT).
#[test]
fn timely_takes_the_rtt_from_the_acks_arrival() {
    let mut p = Pair::new(Congestion::Timely(TimelyConfig::default()));
    let mut now = Instant::ZERO;
    for _ in 0..2 {
        p.write(1000);
        let requests = deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::NotEct);
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].1, Ecn::NotEct, "TIMELY reads no marks");
        now = Instant::from_nanos(now.as_nanos() + 600_000);
        deliver(&mut p.b, &mut p.a, &mut now, |_| Ecn::NotEct);
    }
    let rate = p.a.qp_congestion(p.a_qp, now).unwrap().rate_bps.unwrap();
    let expected = LINE as f64 * (1.0 - 0.8 * (1.0 - 500.0 / 600.0));
    assert!((rate as f64 - expected).abs() < 2.0, "{rate} vs {expected}");
}

/// DCTCP's window: with no ACK back, the requester stops once the bytes on the wire in flight
/// reach `base_rtt_ns` at its rate (13 µs at 10 Gb/s: 16 250 bytes), well inside the PSN window.
#[test]
fn dctcp_holds_the_bytes_in_flight_to_its_window() {
    let mut p = Pair::new(Congestion::Dctcp(DctcpConfig::default()));
    p.write(64 * 1024);
    let mut now = Instant::ZERO;
    let requests = deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::Ect0);
    assert_stopped_at_the_window(&requests, 16_250, "dctcp");
    // The ACKs reopen it.
    deliver(&mut p.b, &mut p.a, &mut now, |_| Ecn::NotEct);
    assert!(!deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::Ect0).is_empty());
}

/// HPCC's window counts the bytes on the wire in flight by default, and with `window_payload`
/// the payload bytes, as ns-3's does (`snd_nxt − snd_una`): at 13 µs and 10 Gb/s the window is
/// 16 250 bytes either way, which the wire's 1 024-byte payloads with their headers and INT's
/// 44 bytes fill a packet sooner.
#[test]
fn hpcc_counts_its_window_on_the_wire_or_in_payload_as_ns3() {
    let payloads = |window_payload| {
        let mut p = Pair::new(Congestion::Hpcc(HpccConfig {
            window_payload,
            ..HpccConfig::default()
        }));
        p.write(64 * 1024);
        let mut now = Instant::ZERO;
        let requests = deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::NotEct);
        let payloads: Vec<usize> = requests
            .iter()
            .map(|(b, _)| {
                let mut b = b.clone();
                let bare = roce_wire::int::strip_in_place(&mut b).expect("an INT header");
                roce_wire::packet::Packet::new_checked(&*bare)
                    .unwrap()
                    .payload()
                    .len()
            })
            .collect();
        (requests, payloads)
    };
    let (requests, wire_payloads) = payloads(false);
    assert_stopped_at_the_window(&requests, 16_250, "hpcc");
    let (_, payloads) = payloads(true);
    assert_filled(&payloads, 16_250, "hpcc, payload");
    assert!(
        payloads.len() > wire_payloads.len(),
        "the payload's count lets more packets go: {} against {}",
        payloads.len(),
        wire_payloads.len()
    );
}

/// The requests sent fill a window of `window` bytes on the wire and stop there: the last
/// one went while less than the window was in flight. A packet's bytes on the wire are its UDP
/// payload and 42 bytes of Ethernet, IPv4 and UDP.
fn assert_stopped_at_the_window(requests: &[(Vec<u8>, Ecn)], window: usize, what: &str) {
    let wire: Vec<usize> = requests.iter().map(|(b, _)| b.len() + 42).collect();
    assert_filled(&wire, window, what);
}

/// Packets of `sizes` bytes, counted as the window counts them, fill `window` and stop there:
/// the last one went while less than the window was in flight.
fn assert_filled(sizes: &[usize], window: usize, what: &str) {
    let total: usize = sizes.iter().sum();
    assert!(
        total >= window,
        "{what}: {} packets, {total} bytes",
        sizes.len()
    );
    assert!(
        total - sizes[sizes.len() - 1] < window,
        "{what}: {total} bytes"
    );
}

/// DCQCN and TIMELY with a window (`window_rtt_ns`, ns-3's `dcqcn_vwin` and `timely_vwin`):
/// as DCTCP's, the bytes on the wire in flight stop at the rate × T (13 µs at 10 Gb/s: 16 250
/// bytes) and every request asks for an ACK, which reopens it. Without it (the default) the
/// whole 64 KiB goes, paced, with no ACK asked for in between.
#[test]
fn dcqcn_and_timely_with_a_window_hold_the_bytes_in_flight_to_it() {
    let windowed = [
        Congestion::Dcqcn(DcqcnConfig {
            window_rtt_ns: 13_000,
            ..DcqcnConfig::default()
        }),
        Congestion::Timely(TimelyConfig {
            window_rtt_ns: 13_000,
            ..TimelyConfig::default()
        }),
    ];
    for congestion in windowed {
        let mut p = Pair::new(congestion);
        p.write(64 * 1024);
        let mut now = Instant::ZERO;
        let requests = deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::NotEct);
        assert_stopped_at_the_window(&requests, 16_250, &format!("{congestion:?}"));
        let asks = requests
            .iter()
            .filter(|(b, _)| roce_wire::bth::Packet::new_unchecked(&b[..]).ack_req())
            .count();
        assert_eq!(
            asks,
            requests.len(),
            "{congestion:?}: every request asks for an ACK"
        );
        // The ACKs reopen it.
        deliver(&mut p.b, &mut p.a, &mut now, |_| Ecn::NotEct);
        assert!(!deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::NotEct).is_empty());
    }
    for congestion in [
        Congestion::Dcqcn(DcqcnConfig::default()),
        Congestion::Timely(TimelyConfig::default()),
    ] {
        let mut p = Pair::new(congestion);
        p.write(64 * 1024);
        let mut now = Instant::ZERO;
        let requests = deliver(&mut p.a, &mut p.b, &mut now, |_| Ecn::NotEct);
        let payload: usize = requests.iter().map(|(b, _)| b.len()).sum();
        assert!(payload > 64 * 1024, "{congestion:?}: {payload} bytes");
    }
}

/// The datagram `payload` of the transmit `t` as its receiver gets it.
fn datagram<'a>(payload: &'a [u8], t: &crate::Transmit) -> Datagram<'a> {
    Datagram {
        src: SocketAddr::new(t.src, t.src_port),
        dst: t.dst,
        ecn: Ecn::NotEct,
        ip_id: Some(0),
        segment: 0,
        payload,
    }
}

/// HPCC: each request carries an empty INT header after the BTH (flagged in BTH byte 8); a hop
/// stamped on the way keeps the ICRC valid; the ACK echoes the record; the requester's HPCC
/// hears it. A NIC without HPCC drops a flagged packet, and a bad hop count is dropped too,
/// each under its counter.
#[test]
fn hpcc_requests_carry_int_that_switches_stamp_and_acks_echo() {
    use roce_wire::int;
    let hpcc = Congestion::Hpcc(HpccConfig::default());
    let mut p = Pair::new(hpcc);
    p.write(100);
    let mut buf = vec![0; MAX_DATAGRAM];
    let now = Instant::ZERO;
    let t = p.a.poll_transmit(now, &mut buf).unwrap();
    let mut request = buf[..t.len].to_vec();
    assert!(int::flagged(&request));
    let header = int::Repr::parse(&int::Packet::new_checked(&request[12..]).unwrap()).unwrap();
    assert_eq!(header, int::Repr::default());
    let hop = int::Hop::new(1234, 5678, 960, 100_000_000_000);
    assert!(int::Packet::new_unchecked(&mut request[12..]).push_hop(hop));
    // Without HPCC the same packet is dropped, counted.
    let mut plain = Pair::new(Congestion::None);
    plain.b.handle_datagram(now, datagram(&request, &t));
    assert_eq!(plain.b.stats().rx_int_unexpected, 1);
    assert_eq!(plain.b.stats().rx_accepted, 0, "nothing of it taken in");
    assert_eq!(plain.b.poll_transmit(now, &mut buf), None, "nor answered");
    // A bad hop count (the ICRC masks the header, so only the parse sees it).
    let mut bad = request.clone();
    bad[12] = 7;
    p.b.handle_datagram(now, datagram(&bad, &t));
    assert_eq!(p.b.stats().rx_int_malformed, 1);
    assert_eq!(p.b.stats().rx_accepted, 0, "nothing of it taken in");
    p.b.handle_datagram(now, datagram(&request, &t));
    assert_eq!(p.b.stats().rx_icrc_errors, 0);
    let t = p.b.poll_transmit(now, &mut buf).unwrap();
    let ack = &buf[..t.len];
    assert_eq!(ack[0], ACK);
    let echo = int::Repr::parse(&int::Packet::new_checked(&ack[12..]).unwrap()).unwrap();
    assert!(echo.echo);
    assert_eq!(echo.hops(), &[hop]);
    p.a.handle_datagram(now, datagram(ack, &t));
    assert_eq!(p.a.stats().rx_acks, 1);
    assert_eq!(p.a.stats().rx_icrc_errors, 0);
}

/// Hands `nic` the datagram `payload` as `t` sent it: by [`Nic::handle_datagram_mut`] in a
/// buffer it may rewrite (`in_place`), or by [`Nic::handle_datagram`].
fn take_datagram(
    nic: &mut Nic,
    now: Instant,
    mut payload: Vec<u8>,
    t: &crate::Transmit,
    in_place: bool,
) {
    if in_place {
        let d = datagram(&[], t);
        nic.handle_datagram_mut(
            now,
            crate::DatagramMut {
                src: d.src,
                dst: d.dst,
                ecn: d.ecn,
                ip_id: d.ip_id,
                segment: d.segment,
                payload: &mut payload,
            },
        );
    } else {
        nic.handle_datagram(now, datagram(&payload, t));
    }
}

/// HPCC-PINT on the wire: requests carry PINT's 4-byte header at 0 (not INT's 44 bytes), a
/// switch raises it, the ACK echoes the raised value, the sender's U is that value decoded,
/// and its rate follows; the ICRC holds throughout (the header is masked), both ways, with the
/// packet taken off in place or by a copy.
#[test]
fn hpcc_pint_requests_carry_a_value_switches_raise_and_acks_echo() {
    use roce_wire::{int, pint};
    let config = HpccConfig {
        pint: true,
        ..HpccConfig::default()
    };
    for in_place in [false, true] {
        let mut p = Pair::new(Congestion::Hpcc(config));
        let mut int_pair = Pair::new(Congestion::Hpcc(HpccConfig::default()));
        p.write(100);
        int_pair.write(100);
        let mut buf = vec![0; MAX_DATAGRAM];
        let now = Instant::ZERO;
        let t = p.a.poll_transmit(now, &mut buf).unwrap();
        let mut request = buf[..t.len].to_vec();
        let with_int = int_pair.a.poll_transmit(now, &mut buf).unwrap();
        assert_eq!(t.len + int::HEADER_LEN - int::PINT_HEADER_LEN, with_int.len);
        assert_eq!(int::header(&request), Ok(int::Repr::pint(false, 0)));
        assert_eq!(request[int::BTH_FLAG_BYTE] & 0x60, int::PINT_BTH_FLAG);
        let value = pint::encode(2.0, config.pint_base(), 0);
        assert!(int::raise_pint(&mut request, value));
        let take = |nic: &mut Nic, payload: Vec<u8>, t: &crate::Transmit| {
            take_datagram(nic, now, payload, t, in_place);
        };
        // Both flags: malformed, dropped before anything of it is taken in or answered.
        let mut both = request.clone();
        both[int::BTH_FLAG_BYTE] |= int::BTH_FLAG;
        take(&mut p.b, both, &t);
        assert_eq!(p.b.stats().rx_int_malformed, 1);
        assert_eq!(p.b.stats().rx_accepted, 0);
        assert_eq!(p.b.poll_transmit(now, &mut buf), None);
        take(&mut p.b, request, &t);
        assert_eq!(p.b.stats().rx_icrc_errors, 0);
        assert_eq!(p.b.stats().rx_accepted, 1);
        let t = p.b.poll_transmit(now, &mut buf).unwrap();
        let ack = buf[..t.len].to_vec();
        assert_eq!(ack[0], ACK);
        assert_eq!(int::header(&ack), Ok(int::Repr::pint(true, value)));
        // A second echo of the same value (the sender's first ACK only starts its RTT).
        take(&mut p.a, ack.clone(), &t);
        assert_eq!(p.a.stats().rx_acks, 1);
        assert_eq!(p.a.stats().rx_icrc_errors, 0);
        p.write(100);
        let later = Instant::from_micros(10); // past the first packet's pacing
        let t = p.a.poll_transmit(later, &mut buf).unwrap();
        let mut request = buf[..t.len].to_vec();
        assert!(int::raise_pint(&mut request, value));
        take(&mut p.b, request, &t);
        let t = p.b.poll_transmit(later, &mut buf).unwrap();
        take(&mut p.a, buf[..t.len].to_vec(), &t);
        let state = p.a.qp_congestion(p.a_qp, later).unwrap();
        let u = pint::decode(value, config.pint_base());
        assert_eq!(state.alpha, u, "U is the echoed value, decoded");
        assert!((state.rate_bps.unwrap() as f64) < 100e9 * 0.95 / u * 1.01);
    }
}

/// [`Nic::handle_datagram_mut`] takes the INT header off in place: for the same datagrams (a
/// bad hop count, a stamped request, the ACK that echoes it) it counts, answers and hears
/// exactly what [`Nic::handle_datagram`], which copies, does.
#[test]
fn int_taken_off_in_place_is_taken_off_as_by_a_copy() {
    use roce_wire::int;
    let run = |in_place: bool| {
        let mut p = Pair::new(Congestion::Hpcc(HpccConfig::default()));
        p.write(100);
        let mut buf = vec![0; MAX_DATAGRAM];
        let now = Instant::ZERO;
        let take = |nic: &mut Nic, payload: Vec<u8>, t: &crate::Transmit| {
            take_datagram(nic, now, payload, t, in_place);
        };
        let t = p.a.poll_transmit(now, &mut buf).unwrap();
        let mut request = buf[..t.len].to_vec();
        let hop = int::Hop::new(1234, 5678, 960, 100_000_000_000);
        assert!(int::Packet::new_unchecked(&mut request[12..]).push_hop(hop));
        let mut bad = request.clone();
        bad[12] = 7;
        take(&mut p.b, bad, &t);
        take(&mut p.b, request, &t);
        let t = p.b.poll_transmit(now, &mut buf).unwrap();
        let ack = buf[..t.len].to_vec();
        take(&mut p.a, ack.clone(), &t);
        let state = p.a.qp_congestion(p.a_qp, now).unwrap();
        (ack, p.a.stats().clone(), p.b.stats().clone(), state)
    };
    let (ack, a, b, state) = run(true);
    assert_eq!((b.rx_int_malformed, b.rx_accepted, a.rx_acks), (1, 1, 1));
    assert_eq!(run(false), (ack, a, b, state));
}

/// A UD QP of its own on a NIC at `ip` with DCQCN: the NIC, the QP, its CQ and a region.
fn ud_nic(ip: IpAddr) -> (Nic, crate::Qpn, crate::CqHandle, crate::MemoryRegion) {
    let mut nic = Nic::new(NicConfig {
        addrs: vec![ip],
        congestion: Congestion::Dcqcn(DcqcnConfig::default()),
        line_rate_bps: LINE,
        ..NicConfig::default()
    });
    let pd = nic.alloc_pd();
    let cq = nic.create_cq(16);
    let mr = nic.reg_mr(pd, 4096, Access::ALL).unwrap();
    let qp = nic.create_qp(&QpInit::new(QpType::Ud, pd, cq, 8)).unwrap();
    let ud = Connect {
        qp_type: QpType::Ud,
        qkey: 0x11,
        ..Connect::rc(
            AddressVector::new(ip, ip),
            crate::Qpn::new(0),
            Psn::new(0),
            Psn::new(0),
        )
    };
    nic.connect_qp(qp, &ud).unwrap();
    (nic, qp, cq, mr)
}

/// `from`'s UD QP `qp` sends 64 bytes to `to` (QP `to_qp` at `to_ip`), delivered at `now`
/// with `ecn`.
fn ud_send(
    (from, qp, mr): (&mut Nic, crate::Qpn, &crate::MemoryRegion),
    (to, to_ip, to_qp): (&mut Nic, IpAddr, crate::Qpn),
    now: Instant,
    ecn: Ecn,
) {
    let mut wr = SendWr::new(
        1,
        SendOp::Send,
        Sge {
            addr: mr.addr(),
            length: 64,
            lkey: mr.lkey(),
        },
    );
    wr.ud = Some(crate::UdDest {
        ip: to_ip,
        qpn: to_qp,
        qkey: 0x11,
    });
    from.post_send(qp, wr).unwrap();
    let sent = deliver(from, to, &mut now.clone(), |_| ecn);
    assert_eq!(sent.len(), 1, "one datagram");
    assert_eq!(
        sent[0].1,
        Ecn::Ect0,
        "sent ECN-capable, for switches to mark"
    );
}

/// DCQCN's notification point on a UD QP (Annex A17.9.3, the CNP names the QP whose packets
/// were marked): a CE-marked datagram brings a CNP to the QP that sent it, at its address (its
/// DETH's source QPN), and cuts that sender's rate alone; another marked one within
/// `min_time_between_cnps` (4 µs) brings none, one after it another.
#[test]
//= ibta:annex17/A17.9.3
fn a_ce_marked_ud_datagram_brings_its_sender_a_cnp() {
    let ip = |last| IpAddr::V4(Ipv4Addr::new(198, 18, 0, last));
    let (mut b, b_qp, _, b_mr) = ud_nic(ip(2));
    let (mut a1, a1_qp, _, a1_mr) = ud_nic(ip(1));
    let (mut a2, a2_qp, _, a2_mr) = ud_nic(ip(3));
    for wr_id in 0..4 {
        let sge = Sge {
            addr: b_mr.addr(),
            length: 256,
            lkey: b_mr.lkey(),
        };
        b.post_recv(
            b_qp,
            crate::RecvWr {
                wr_id,
                sgl: [sge].into(),
            },
        )
        .unwrap();
    }
    // A CNP from B, if any: its destination, DestQP and bytes.
    let cnp_from_b = |b: &mut Nic, now| {
        let mut buf = vec![0; MAX_DATAGRAM];
        let t = b.poll_transmit(now, &mut buf)?;
        assert_eq!(buf[0], 0x81, "a CNP");
        let bth = roce_wire::bth::Packet::new_unchecked(&buf[..t.len]);
        Some((t.dst.ip(), bth.dest_qp(), buf[..t.len].to_vec()))
    };
    let t0 = Instant::from_micros(10);
    ud_send((&mut a1, a1_qp, &a1_mr), (&mut b, ip(2), b_qp), t0, Ecn::Ce);
    ud_send(
        (&mut a2, a2_qp, &a2_mr),
        (&mut b, ip(2), b_qp),
        t0,
        Ecn::Ect0,
    );
    let (dst, dest_qp, cnp) = cnp_from_b(&mut b, t0).expect("a CNP for A1's marked datagram");
    assert_eq!((dst, dest_qp), (ip(1), a1_qp), "to A1's QP, at A1");
    assert_eq!(cnp_from_b(&mut b, t0), None, "none for A2's unmarked one");
    assert_eq!(b.stats().tx_cnps, 1);
    // A1 takes it, though it has no DETH and comes from a host its QP never named.
    a1.handle_datagram(
        t0,
        Datagram {
            src: SocketAddr::new(ip(2), 0xc000),
            dst: SocketAddr::new(ip(1), 4791),
            ecn: Ecn::NotEct,
            ip_id: Some(0),
            segment: 0,
            payload: &cnp,
        },
    );
    assert_eq!((a1.stats().rx_cnps, a1.stats().rate_decreases), (1, 1));
    assert_eq!(a1.stats().rx_dropped(), 0);
    assert_eq!(a2.stats().rate_decreases, 0);
    // Within the gap: a mark, no CNP; past it: a CNP.
    let t1 = Instant::from_micros(12);
    ud_send((&mut a1, a1_qp, &a1_mr), (&mut b, ip(2), b_qp), t1, Ecn::Ce);
    assert_eq!(cnp_from_b(&mut b, t1), None, "2 µs after the last CNP");
    let t2 = Instant::from_micros(15);
    ud_send((&mut a1, a1_qp, &a1_mr), (&mut b, ip(2), b_qp), t2, Ecn::Ce);
    assert_eq!(
        cnp_from_b(&mut b, t2).map(|c| c.1),
        Some(a1_qp),
        "5 µs after"
    );
}
