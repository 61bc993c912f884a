//! Every operation end to end between two NICs over perfect links: data lands where it should,
//! completions say what happened, the peer's memory holds what atomics left.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use roce_core::{QpState, SendOp, SendWr, WcOpcode, WcStatus};
use roce_sim::{Pair, PairConfig};
use roce_tests::sim::{
    compare_swap, drive_millis, fetch_add, pattern, post, post_from_a, post_recv, remote, success,
    wr,
};

fn pair() -> (Pair, roce_sim::TraceGuard) {
    let log = roce_sim::trace_to_test_output();
    (Pair::connected(&PairConfig::default()), log)
}

#[test]
fn send_of_every_size_lands_in_the_receive_wr() {
    let (mut pair, _log) = pair();
    for (i, len) in [0u32, 1, 3, 1023, 1024, 1025, 4096, 10_000]
        .into_iter()
        .enumerate()
    {
        let data = pattern(i as u64, len as usize);
        pair.a.mr.write(0, &data);
        post_recv(&mut pair.b, 100 + i as u64, 0, 16384);
        post_from_a(&mut pair, i as u64, SendOp::Send, 0, len);
        drive_millis(&mut pair, 10);
        success(pair.a.completion(), i as u64, WcOpcode::Send);
        let recv = success(pair.b.completion(), 100 + i as u64, WcOpcode::Recv);
        assert_eq!(recv.byte_len, len);
        assert_eq!(pair.b.mr.read(0, len as usize).unwrap(), data, "len {len}");
    }
    assert_eq!(pair.a.nic.stats().retransmitted_packets, 0);
}

#[test]
fn send_with_immediate_and_with_invalidate() {
    let (mut pair, _log) = pair();
    post_recv(&mut pair.b, 1, 0, 100);
    post_recv(&mut pair.b, 2, 0, 100);
    post_from_a(&mut pair, 10, SendOp::SendWithImm(0xfeed_beef), 0, 5);
    let rkey = pair.b.mr.rkey();
    post_from_a(&mut pair, 11, SendOp::SendWithInv(rkey), 0, 5);
    drive_millis(&mut pair, 10);
    let first = success(pair.b.completion(), 1, WcOpcode::Recv);
    assert_eq!(first.imm_data, Some(0xfeed_beef));
    let second = success(pair.b.completion(), 2, WcOpcode::Recv);
    assert_eq!(second.invalidated_rkey, Some(rkey));
    // The invalidated rkey no longer opens the region to WRITEs: remote access error.
    let op = SendOp::RdmaWrite(remote(&pair.b, 0));
    post_from_a(&mut pair, 12, op, 0, 8);
    drive_millis(&mut pair, 10);
    let completions = pair.a.completions();
    assert_eq!(
        completions.last().unwrap().status,
        WcStatus::RemAccessErr,
        "{completions:?}"
    );
}

#[test]
fn write_lands_in_the_peers_memory_without_a_receive() {
    let (mut pair, _log) = pair();
    let data = pattern(7, 100_000);
    pair.a.mr.write(0, &data);
    let op = SendOp::RdmaWrite(remote(&pair.b, 1000));
    post_from_a(&mut pair, 1, op, 0, 100_000);
    drive_millis(&mut pair, 20);
    success(pair.a.completion(), 1, WcOpcode::RdmaWrite);
    assert_eq!(pair.b.completion(), None);
    assert_eq!(pair.b.mr.read(1000, 100_000).unwrap(), data);
}

#[test]
fn write_with_immediate_consumes_a_receive() {
    let (mut pair, _log) = pair();
    post_recv(&mut pair.b, 5, 0, 0);
    pair.a.mr.write(0, b"abcdefgh");
    let op = SendOp::RdmaWriteWithImm(remote(&pair.b, 64), 42);
    post_from_a(&mut pair, 1, op, 0, 8);
    drive_millis(&mut pair, 10);
    let recv = success(pair.b.completion(), 5, WcOpcode::RecvRdmaWithImm);
    assert_eq!((recv.imm_data, recv.byte_len), (Some(42), 8));
    assert_eq!(pair.b.mr.read(64, 8).unwrap(), b"abcdefgh");
}

#[test]
fn read_brings_the_peers_memory_back() {
    let (mut pair, _log) = pair();
    let data = pattern(3, 70_000);
    pair.b.mr.write(500, &data);
    let op = SendOp::RdmaRead(remote(&pair.b, 500));
    post_from_a(&mut pair, 1, op, 9000, 70_000);
    drive_millis(&mut pair, 20);
    let cqe = success(pair.a.completion(), 1, WcOpcode::RdmaRead);
    assert_eq!(cqe.byte_len, 70_000);
    assert_eq!(pair.a.mr.read(9000, 70_000).unwrap(), data);
}

#[test]
fn atomics_return_the_original_value_and_change_the_peers_memory() {
    let (mut pair, _log) = pair();
    pair.b.mr.write(8, &100u64.to_le_bytes());
    let add = fetch_add(&pair.a, 1, &pair.b, 8, 23, 0);
    post(&mut pair, true, add);
    let cas = compare_swap(&pair.a, 2, &pair.b, 8, 123, 7, 8);
    post(&mut pair, true, cas);
    let miss = compare_swap(&pair.a, 3, &pair.b, 8, 123, 9, 16);
    post(&mut pair, true, miss);
    drive_millis(&mut pair, 10);
    success(pair.a.completion(), 1, WcOpcode::FetchAdd);
    success(pair.a.completion(), 2, WcOpcode::CompareSwap);
    success(pair.a.completion(), 3, WcOpcode::CompareSwap);
    assert_eq!(pair.a.mr.read(0, 8).unwrap(), 100u64.to_le_bytes());
    assert_eq!(pair.a.mr.read(8, 8).unwrap(), 123u64.to_le_bytes());
    assert_eq!(
        pair.a.mr.read(16, 8).unwrap(),
        7u64.to_le_bytes(),
        "the second swap missed"
    );
    assert_eq!(pair.b.mr.read(8, 8).unwrap(), 7u64.to_le_bytes());
}

#[test]
fn both_directions_at_once_complete_in_order() {
    let (mut pair, _log) = pair();
    for i in 0..50 {
        post_recv(&mut pair.a, i, 0, 2048);
        post_recv(&mut pair.b, i, 0, 2048);
        post_from_a(&mut pair, i, SendOp::Send, 4096, 2000);
        let to_a = wr(&pair.b, i, SendOp::Send, 4096, 2000);
        post(&mut pair, false, to_a);
    }
    drive_millis(&mut pair, 50);
    for side in [&mut pair.a, &mut pair.b] {
        let ids: Vec<u64> = side
            .completions()
            .iter()
            .filter(|c| c.opcode == WcOpcode::Send)
            .map(|c| c.wr_id)
            .collect();
        assert_eq!(ids, (0..50).collect::<Vec<_>>());
        assert_eq!(side.qp_state(), QpState::Rts);
    }
}

#[test]
fn unsignaled_sends_complete_silently() {
    let (mut pair, _log) = pair();
    for i in 0..3 {
        post_recv(&mut pair.b, i, 0, 64);
        let mut send = wr(&pair.a, i, SendOp::Send, 0, 8);
        send.signaled = i == 2;
        post(&mut pair, true, send);
    }
    drive_millis(&mut pair, 10);
    let ids: Vec<u64> = pair.a.completions().iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [2]);
    assert_eq!(pair.b.completions().len(), 3);
}

#[test]
fn psns_wrap_around_at_2_pow_24() {
    let config = PairConfig {
        a_psn: roce_core::Psn::new(0x00ff_fffe),
        ..PairConfig::default()
    };
    let mut pair = Pair::connected(&config);
    post_recv(&mut pair.b, 1, 0, 8192);
    let data = pattern(11, 5000);
    pair.a.mr.write(0, &data);
    post_from_a(&mut pair, 1, SendOp::Send, 0, 5000);
    drive_millis(&mut pair, 10);
    success(pair.a.completion(), 1, WcOpcode::Send);
    success(pair.b.completion(), 1, WcOpcode::Recv);
    assert_eq!(pair.b.mr.read(0, 5000).unwrap(), data);
    assert_eq!(pair.a_to_b.sent_psns(), [0xff_fffe, 0xff_ffff, 0, 1, 2]);
}

#[test]
fn inline_sends_and_writes_carry_bytes_from_no_region() {
    let (mut pair, _log) = pair();
    let data = pattern(7, 200);
    post_recv(&mut pair.b, 1, 0, 4096);
    // verbs' IBV_SEND_INLINE: the bytes are the WR's, from memory no region covers.
    let mut send = SendWr::new(1, SendOp::Send, Vec::new());
    send.inline_data = Some(data.clone().into());
    post(&mut pair, true, send);
    let mut write = SendWr::new(2, SendOp::RdmaWrite(remote(&pair.b, 1024)), Vec::new());
    write.inline_data = Some(data.clone().into());
    post(&mut pair, true, write);
    // A READ has nowhere to land inline: refused, and nothing goes out for it.
    let mut read = SendWr::new(3, SendOp::RdmaRead(remote(&pair.b, 0)), Vec::new());
    read.inline_data = Some(vec![0; 8].into());
    assert!(pair.a.nic.post_send(pair.a.qpn, read).is_err());
    drive_millis(&mut pair, 10);

    success(pair.a.completion(), 1, WcOpcode::Send);
    success(pair.a.completion(), 2, WcOpcode::RdmaWrite);
    assert_eq!(
        pair.a.completion(),
        None,
        "the refused READ made no completion"
    );
    let recv = success(pair.b.completion(), 1, WcOpcode::Recv);
    assert_eq!(recv.byte_len, 200);
    assert_eq!(pair.b.mr.read(0, 200).unwrap(), data);
    assert_eq!(pair.b.mr.read(1024, 200).unwrap(), data);
    assert!(
        pair.a.mr.read(0, 200).unwrap().iter().all(|&b| b == 0),
        "a's region played no part"
    );
    assert_eq!(
        pair.b.nic.stats().rx_packets,
        2,
        "two packets: the READ never left"
    );
}

#[test]
fn a_nic_on_its_own_port_builds_each_packet_as_the_wire_frees_and_they_arrive_as_before() {
    // A 4 KiB WRITE, four packets at path MTU 1024, over a wire of 8 Gb/s (a byte a ns).
    let run = |nic_port| {
        let mut config = PairConfig::default();
        config.link.bandwidth_bps = Some(8_000_000_000);
        config.link.nic_port = nic_port;
        let mut pair = Pair::connected(&config);
        pair.a.mr.write(0, &pattern(7, 4096));
        let op = SendOp::RdmaWrite(remote(&pair.b, 0));
        post_from_a(&mut pair, 1, op, 0, 4096);
        drive_millis(&mut pair, 10);
        success(pair.a.completion(), 1, WcOpcode::RdmaWrite);
        assert_eq!(pair.b.mr.read(0, 4096).unwrap(), pattern(7, 4096));
        let sent = pair.a_to_b.sent();
        assert_eq!(sent.len(), 4);
        let offered: Vec<_> = sent.iter().map(|s| s.time).collect();
        let arrived: Vec<_> = sent.iter().map(|s| s.arrival.unwrap()).collect();
        (offered, arrived, config.link.latency)
    };
    let (queued, queued_arrivals, _) = run(false);
    let (paced, paced_arrivals, latency) = run(true);
    // Into a queue, the NIC builds all four at once; on its own port, each when the last has
    // left the wire (its arrival less the cable's latency), and not before.
    assert!(queued.iter().all(|&t| t == queued[0]), "{queued:?}");
    assert_eq!(paced[0], queued[0]);
    for i in 1..4 {
        assert_eq!(paced[i] + latency, paced_arrivals[i - 1], "{paced:?}");
    }
    // The wire was the limit either way: every packet arrives when it did.
    assert_eq!(paced_arrivals, queued_arrivals);
}
