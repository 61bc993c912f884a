//! Selective repeat (IRN-style, `LossRecovery::SelectiveRepeat`; the design is in roce-core's
//! `qp/selective.rs`) between two NICs: a lost packet is sent again alone, the data is whole,
//! each WR completes once and in order; a seeded sweep keeps every invariant of
//! `sim_random.rs`; on a long, lossy link it sends again about what was lost, where go-back-N
//! sends again a window per loss.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::collections::HashMap;

use roce_core::{Duration, Instant, LossRecovery, NicConfig, SendOp, WcOpcode, WcStatus};
use roce_sim::{Fate, Fault, LinkConfig, Pair, PairConfig};
use roce_tests::sim::{drop_once, pattern, post, post_mixed, post_recv, remote, success, wr};
use roce_wire::{Opcode, Psn};

const PMTU: u32 = 1024;

fn selective(bdp_packets: u32) -> NicConfig {
    NicConfig {
        loss_recovery: LossRecovery::selective_repeat(bdp_packets),
        ..NicConfig::default()
    }
}

fn pair_with(config: PairConfig) -> (Pair, roce_sim::TraceGuard) {
    let log = roce_sim::trace_to_test_output();
    (Pair::connected(&config), log)
}

fn sr_pair() -> (Pair, roce_sim::TraceGuard) {
    pair_with(PairConfig {
        nic: selective(128),
        ..PairConfig::default()
    })
}

/// a WRITEs `len` bytes of a pattern from `at` of its region to `at` of b's.
fn write_at(pair: &mut Pair, wr_id: u64, at: u64, len: u32) -> Vec<u8> {
    let data = pattern(wr_id, len as usize);
    pair.a.mr.write(at as usize, &data);
    let op = SendOp::RdmaWrite(remote(&pair.b, at));
    let write = wr(&pair.a, wr_id, op, at, len);
    post(pair, true, write);
    data
}

/// Puts `len` bytes of a pattern at `at` in b's region and posts a READ of them into a's
/// region at `at`; returns the bytes.
fn read_at(pair: &mut Pair, wr_id: u64, at: u64, len: u32) -> Vec<u8> {
    let data = pattern(wr_id, len as usize);
    pair.b.mr.write(at as usize, &data);
    let op = SendOp::RdmaRead(remote(&pair.b, at));
    let read = wr(&pair.a, wr_id, op, at, len);
    post(pair, true, read);
    data
}

#[test]
fn a_lost_middle_packet_is_sent_again_alone() {
    let (mut pair, _log) = sr_pair();
    pair.a_to_b.fail(drop_once(1));
    let data = write_at(&mut pair, 1, 0, 4 * PMTU);
    pair.drive_until(Instant::from_millis(5));
    assert_eq!(pair.a_to_b.sent_psns(), [0, 1, 2, 3, 1], "only PSN 1 twice");
    let (a, b) = (pair.a.nic.stats(), pair.b.nic.stats());
    assert_eq!((b.rx_held_out_of_order, b.tx_sacks), (2, 2));
    assert_eq!((a.rx_sacks, a.retransmitted_packets), (2, 1));
    assert_eq!((a.retransmit_timeouts, a.rx_nak_seq_err), (0, 0));
    success(pair.a.completion(), 1, WcOpcode::RdmaWrite);
    assert_eq!(pair.a.completion(), None, "exactly one completion");
    assert_eq!(pair.b.mr.read(0, data.len()).unwrap(), data);
}

#[test]
fn a_requester_whose_psns_start_past_the_middle_of_the_space_repeats_selectively_too() {
    // b's first PSN is 0x800000: its scoreboard starts there, not at 0.
    let (mut pair, _log) = sr_pair();
    pair.b_to_a.fail(drop_once(0x80_0001));
    let data = pattern(9, 4 * PMTU as usize);
    pair.b.mr.write(0, &data);
    let op = SendOp::RdmaWrite(remote(&pair.a, 0));
    let write = wr(&pair.b, 1, op, 0, 4 * PMTU);
    post(&mut pair, false, write);
    pair.drive_until(Instant::from_millis(5));
    let sent: Vec<u32> = pair
        .b_to_a
        .sent()
        .iter()
        .filter(|s| s.opcode.is_some_and(|o| o != Opcode::RcAcknowledge))
        .filter_map(|s| s.psn.map(Psn::value))
        .collect();
    assert_eq!(
        sent,
        [0x80_0000, 0x80_0001, 0x80_0002, 0x80_0003, 0x80_0001]
    );
    assert_eq!(pair.b.nic.stats().retransmit_timeouts, 0);
    success(pair.b.completion(), 1, WcOpcode::RdmaWrite);
    assert_eq!(pair.a.mr.read(0, data.len()).unwrap(), data);
}

#[test]
fn go_back_n_sends_the_rest_again_where_selective_repeat_does_not() {
    // The same loss under the default: everything from the lost packet on goes again.
    let (mut pair, _log) = pair_with(PairConfig::default());
    pair.a_to_b.fail(drop_once(1));
    write_at(&mut pair, 1, 0, 4 * PMTU);
    pair.drive_until(Instant::from_millis(5));
    assert_eq!(pair.a_to_b.sent_psns(), [0, 1, 2, 3, 1, 2, 3]);
    assert_eq!(
        pair.b.nic.stats().tx_sacks,
        0,
        "no NACK of selective repeat"
    );
}

#[test]
fn writes_around_a_hole_complete_once_and_in_order() {
    let (mut pair, _log) = sr_pair();
    pair.a_to_b.fail(drop_once(5));
    let data: Vec<Vec<u8>> = (0..3)
        .map(|i| write_at(&mut pair, i + 1, i * 8192, 4 * PMTU))
        .collect();
    pair.drive_until(Instant::from_millis(5));
    let sent = pair.a_to_b.sent_psns();
    assert_eq!(sent.len(), 13, "{sent:?}");
    assert_eq!(sent.iter().filter(|&&p| p == 5).count(), 2, "{sent:?}");
    let ids: Vec<u64> = pair.a.completions().iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [1, 2, 3], "each once, in order");
    for (i, d) in data.iter().enumerate() {
        assert_eq!(pair.b.mr.read(i * 8192, d.len()).unwrap(), *d);
    }
}

#[test]
fn sends_around_a_hole_land_in_their_receive_wrs_in_order() {
    let (mut pair, _log) = sr_pair();
    // The first packet of the first SEND is lost: both SENDs wait at b, then land in order.
    pair.a_to_b.fail(drop_once(0));
    post_recv(&mut pair.b, 10, 100_000, 4096);
    post_recv(&mut pair.b, 11, 200_000, 4096);
    let first = pattern(7, 3000);
    let second = pattern(8, 2000);
    pair.a.mr.write(0, &first);
    pair.a.mr.write(8192, &second);
    let op = wr(&pair.a, 1, SendOp::Send, 0, 3000);
    post(&mut pair, true, op);
    let op = wr(&pair.a, 2, SendOp::Send, 8192, 2000);
    post(&mut pair, true, op);
    pair.drive_until(Instant::from_millis(5));
    assert_eq!(pair.a_to_b.sent_psns(), [0, 1, 2, 3, 4, 0]);
    let recvs = pair.b.completions();
    let got: Vec<(u64, u32)> = recvs.iter().map(|c| (c.wr_id, c.byte_len)).collect();
    assert_eq!(got, [(10, 3000), (11, 2000)]);
    assert_eq!(pair.b.mr.read(100_000, 3000).unwrap(), first);
    assert_eq!(pair.b.mr.read(200_000, 2000).unwrap(), second);
    let ids: Vec<u64> = pair.a.completions().iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [1, 2]);
}

#[test]
fn a_lost_read_request_is_asked_again_alone_and_its_data_is_whole() {
    let (mut pair, _log) = sr_pair();
    let w1 = write_at(&mut pair, 1, 0, 2 * PMTU);
    let read_data = read_at(&mut pair, 2, 100_000, 3 * PMTU);
    let w2 = write_at(&mut pair, 3, 8192, 2 * PMTU);
    // PSNs: WRITE 0-1, READ 2-4 (its request at 2), WRITE 5-6.
    pair.a_to_b.fail(Fault::DropOpcode {
        opcode: Opcode::RcRdmaReadRequest,
        times: 1,
    });
    pair.drive_until(Instant::from_millis(5));
    assert_eq!(pair.a_to_b.sent_psns(), [0, 1, 2, 5, 6, 2]);
    let ids: Vec<(u64, WcStatus)> = pair
        .a
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(ids, [1, 2, 3].map(|i| (i, WcStatus::Success)));
    assert_eq!(pair.a.mr.read(100_000, read_data.len()).unwrap(), read_data);
    assert_eq!(pair.b.mr.read(0, w1.len()).unwrap(), w1);
    assert_eq!(pair.b.mr.read(8192, w2.len()).unwrap(), w2);
    assert_eq!(pair.a.nic.stats().retransmit_timeouts, 0);
}

#[test]
fn a_lost_read_response_asks_for_the_read_alone_again() {
    let (mut pair, _log) = sr_pair();
    let read_data = read_at(&mut pair, 1, 100_000, 4 * PMTU);
    let w = write_at(&mut pair, 2, 0, 2 * PMTU);
    pair.b_to_a.fail(Fault::DropOpcode {
        opcode: Opcode::RcRdmaReadResponseMiddle,
        times: 1,
    });
    pair.drive_until(Instant::from_millis(5));
    // READ 0-3, WRITE 4-5; the READ is asked again from its lost response (PSN 1), the
    // WRITE is not sent again.
    assert_eq!(pair.a_to_b.sent_psns(), [0, 4, 5, 1]);
    let ids: Vec<u64> = pair.a.completions().iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [1, 2]);
    assert_eq!(pair.a.mr.read(100_000, read_data.len()).unwrap(), read_data);
    assert_eq!(pair.b.mr.read(0, w.len()).unwrap(), w);
}

/// IRN §3 places READ responses by their PSN: responses after a lost one land at once, and
/// the requester asks again for the lost ones alone, each with a READ request of its own.
#[test]
fn read_responses_after_a_hole_land_and_only_the_lost_ones_are_asked_for_again() {
    let (mut pair, _log) = sr_pair();
    let read_data = read_at(&mut pair, 1, 100_000, 8 * PMTU);
    let w = write_at(&mut pair, 2, 0, 2 * PMTU);
    pair.b_to_a.fail(drop_once(2));
    pair.b_to_a.fail(drop_once(5));
    pair.drive_until(Instant::from_millis(5));
    // READ 0-7, WRITE 8-9; then a READ request for PSN 2 alone, and once it is in, for 5.
    assert_eq!(pair.a_to_b.sent_psns(), [0, 8, 9, 2, 5]);
    let responses: Vec<u32> = pair
        .b_to_a
        .sent()
        .iter()
        .filter(|s| {
            s.opcode
                .and_then(Opcode::layout)
                .is_some_and(|l| l.operation == roce_wire::opcode::Operation::RdmaReadResponse)
        })
        .map(|s| s.psn.unwrap().value())
        .collect();
    assert_eq!(responses, [0, 1, 2, 3, 4, 5, 6, 7, 2, 5]);
    let ids: Vec<u64> = pair.a.completions().iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [1, 2]);
    assert_eq!(pair.a.mr.read(100_000, read_data.len()).unwrap(), read_data);
    assert_eq!(pair.b.mr.read(0, w.len()).unwrap(), w);
    assert_eq!(pair.a.nic.stats().retransmit_timeouts, 0);
}

/// The same across READs: a lost last response of one READ is shown by the next READ's first,
/// which lands; when the first READ completes, the hole in the second is asked for at once.
#[test]
fn a_hole_at_the_end_of_one_read_and_in_the_next_are_each_asked_for_alone() {
    let (mut pair, _log) = sr_pair();
    let mut data = read_at(&mut pair, 1, 100_000, 4 * PMTU);
    data.extend(read_at(
        &mut pair,
        2,
        100_000 + 4 * u64::from(PMTU),
        4 * PMTU,
    ));
    pair.b_to_a.fail(drop_once(3));
    pair.b_to_a.fail(drop_once(5));
    pair.drive_until(Instant::from_millis(5));
    // READs 0-3 and 4-7; then PSN 3 alone, and once the first READ is in, 5 alone.
    assert_eq!(pair.a_to_b.sent_psns(), [0, 4, 3, 5]);
    let ids: Vec<u64> = pair.a.completions().iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [1, 2]);
    assert_eq!(pair.a.mr.read(100_000, data.len()).unwrap(), data);
    assert_eq!(pair.a.nic.stats().retransmit_timeouts, 0);
}

#[test]
fn a_lost_last_packet_waits_only_rto_low() {
    let (mut pair, _log) = sr_pair();
    pair.a_to_b.fail(drop_once(1));
    write_at(&mut pair, 1, 0, 2 * PMTU);
    let done = pair.drive_while(Instant::from_millis(5), |p| {
        p.a.nic.completions_waiting(p.a.cq) == 1
    });
    assert!(done);
    assert_eq!(pair.a.nic.stats().retransmit_timeouts, 1);
    // The ACK timeout (2^8 × 4.096 µs ≈ 1 ms) would have fired far later.
    assert!(pair.now < Instant::from_micros(300), "{:?}", pair.now);
}

/// The workload and invariants of `sim_random.rs`, with selective repeat on both ends.
fn run(seed: u64, loss: f64, bdp: u32) -> bool {
    let link = LinkConfig {
        latency: Duration::from_micros(10),
        bandwidth_bps: Some(10_000_000_000),
        loss,
        corrupt: loss / 4.0,
        duplicate: loss / 4.0,
        reorder_jitter: Duration::from_micros(3),
        ..LinkConfig::default()
    };
    let config = PairConfig {
        seed,
        link,
        retry_cnt: 7,
        timeout: 6,
        nic: selective(bdp),
        // Every fourth seed, a's PSNs cross the wrap of the 24-bit space.
        a_psn: Psn::new(if seed % 4 == 3 { 0x00ff_fff0 } else { 0 }),
        ..PairConfig::default()
    };
    let mut pair = Pair::connected(&config);
    let mixed = post_mixed(&mut pair, seed);
    let done = pair.drive_while(Instant::from_millis(2_000), |p| {
        p.a.nic.completions_waiting(p.a.cq) == 6
    });
    let at = format!("seed {seed} loss {loss} bdp {bdp}");
    let completions = pair.a.completions();
    assert!(done, "{at}: not every WR completed: {completions:?}");
    let settle = pair.now + Duration::from_millis(10);
    pair.drive_until(settle);
    assert_eq!(pair.a.nic.poll_timeout(), None, "{at}: a timer is armed");
    let ids: Vec<u64> = completions.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6], "{at}: each WR once, in order");
    if let Some(failed) = completions
        .iter()
        .position(|c| c.status != WcStatus::Success)
    {
        assert_eq!(completions[failed].status, WcStatus::RetryExcErr, "{at}");
        assert!(
            completions[failed + 1..]
                .iter()
                .all(|c| c.status == WcStatus::WrFlushErr),
            "{at}"
        );
        return false;
    }
    // Atomics executed once each, whatever was duplicated or retried.
    mixed.assert_landed(&mut pair, &at);
    // A PSN never names two different packets.
    let mut seen = HashMap::new();
    for sent in pair.a_to_b.sent() {
        let (Some(psn), Some(opcode)) = (sent.psn, sent.opcode) else {
            continue;
        };
        let first = *seen.entry(psn).or_insert((opcode, sent.len));
        if opcode != Opcode::RcRdmaReadRequest {
            assert_eq!(first, (opcode, sent.len), "{at}: PSN {psn} named two");
        }
    }
    // What b keeps is bounded, and nothing from a fell beyond its window.
    assert_eq!(pair.b.nic.stats().rx_beyond_reorder_window, 0, "{at}");
    assert_eq!(pair.a.nic.stats().rx_bad_sacks, 0, "{at}");
    true
}

#[test]
fn every_seed_keeps_every_invariant_with_selective_repeat() {
    let _log = roce_sim::trace_to_test_output();
    let mut exhausted = 0;
    for seed in 0..96 {
        let loss = [0.0, 0.01, 0.05, 0.1, 0.2][seed as usize % 5];
        // A window of 4 PSNs too: the READ of 7 responses is asked for in pieces.
        let bdp = if seed % 2 == 0 { 128 } else { 4 };
        if !run(seed, loss, bdp) {
            assert_eq!(loss, 0.2, "seed {seed}: retries exhausted at loss {loss}");
            exhausted += 1;
        }
    }
    assert!(exhausted <= 1, "{exhausted} runs exhausted their retries");
}

#[test]
#[ignore = "long sweep: cargo test --release -p roce-tests --test sim_selective_repeat -- --ignored"]
fn many_seeds_with_selective_repeat() {
    // ROCE_SIM_SEEDS=START..END picks the seeds (to replay one: ROCE_SIM_SEEDS=82..83).
    let range = std::env::var("ROCE_SIM_SEEDS").ok().and_then(|r| {
        let (start, end) = r.split_once("..")?;
        Some(start.parse().ok()?..end.parse().ok()?)
    });
    let _log = roce_sim::trace_to_test_output();
    let seeds = range.unwrap_or(0..2000);
    let total = seeds.end - seeds.start;
    let mut exhausted = 0u64;
    for seed in seeds {
        let loss = [0.01, 0.05, 0.1, 0.2][seed as usize % 4];
        let bdp = [128, 16, 4][seed as usize % 3];
        exhausted += u64::from(!run(seed, loss, bdp));
    }
    eprintln!("{exhausted} of {total} runs exhausted their retries");
    assert!(
        exhausted * 50 <= total,
        "{exhausted} of {total} runs exhausted their retries"
    );
}

/// Writes 4 MiB in 64 KiB WRITEs, 16 posted at a time, over a 10 Gb/s link of 50 µs each way
/// (a BDP of about 120 packets of 1 KiB) that loses `loss` of the packets each way; returns
/// (packets lost, packets sent again, simulated time to the last completion).
fn long_link(config: NicConfig, loss: f64) -> (u64, u64, Instant) {
    let link = LinkConfig {
        latency: Duration::from_micros(50),
        bandwidth_bps: Some(10_000_000_000),
        loss,
        ..LinkConfig::default()
    };
    let mut pair = Pair::connected(&PairConfig {
        seed: 7,
        link,
        timeout: 10,
        region_len: 8 << 20,
        nic: config,
        ..PairConfig::default()
    });
    let data = pattern(1, 4 << 20);
    pair.a.mr.write(0, &data);
    let total = 64;
    let mut posted = 0u64;
    let mut done = 0;
    while done < total {
        while posted < total && posted - done < 16 {
            let at = posted * 65536;
            let op = SendOp::RdmaWrite(remote(&pair.b, at));
            let w = wr(&pair.a, posted, op, at, 65536);
            post(&mut pair, true, w);
            posted += 1;
        }
        let deadline = pair.now + Duration::from_millis(100);
        assert!(pair.drive_while(deadline, |p| p.a.nic.completions_waiting(p.a.cq) > 0));
        for c in pair.a.completions() {
            assert_eq!((c.wr_id, c.status), (done, WcStatus::Success));
            done += 1;
        }
    }
    assert_eq!(pair.b.mr.read(0, data.len()).unwrap(), data);
    let lost = [&pair.a_to_b, &pair.b_to_a]
        .iter()
        .flat_map(|l| l.sent())
        .filter(|s| s.fate == Fate::Lost)
        .count() as u64;
    (lost, pair.a.nic.stats().retransmitted_packets, pair.now)
}

#[test]
fn at_one_percent_loss_on_a_long_link_only_what_was_lost_goes_again() {
    let _log = roce_sim::trace_to_test_output();
    let window = 256;
    let gbn = NicConfig {
        max_unacked_psns: window,
        ..NicConfig::default()
    };
    let (gbn_lost, gbn_again, gbn_time) = long_link(gbn, 0.01);
    let (sr_lost, sr_again, sr_time) = long_link(selective(window), 0.01);
    println!(
        "go-back-N: {gbn_lost} lost, {gbn_again} sent again, done at {gbn_time:?}; \
         selective repeat: {sr_lost} lost, {sr_again} sent again, done at {sr_time:?}"
    );
    assert!(sr_lost > 20 && gbn_lost > 20, "the link lost packets");
    assert!(
        sr_again <= 2 * sr_lost,
        "selective repeat sent {sr_again} again for {sr_lost} lost"
    );
    assert!(
        gbn_again >= 10 * gbn_lost,
        "go-back-N sent {gbn_again} again for {gbn_lost} lost"
    );
}

#[test]
fn selective_repeat_moves_no_psn_of_go_back_n_without_loss() {
    // Without loss the option changes nothing on the wire: the same PSNs, opcodes and lengths.
    let run = |nic: NicConfig| {
        let (mut pair, _log) = pair_with(PairConfig {
            nic,
            ..PairConfig::default()
        });
        write_at(&mut pair, 1, 0, 5 * PMTU);
        let op = SendOp::RdmaRead(remote(&pair.b, 0));
        let read = wr(&pair.a, 2, op, 65536, 3 * PMTU);
        post(&mut pair, true, read);
        pair.drive_until(Instant::from_millis(5));
        let trace = |l: &roce_sim::Link| {
            l.sent()
                .iter()
                .map(|s| (s.psn.map(Psn::value), s.opcode, s.len))
                .collect::<Vec<_>>()
        };
        (trace(&pair.a_to_b), trace(&pair.b_to_a))
    };
    assert_eq!(run(NicConfig::default()), run(selective(128)));
}

/// The incast of `scenarios/incast-lossy-sr.toml`: hosts 0–7 write 1 MiB each to host 8 through
/// a 10 Gb/s port with 100 KB of drop-tail buffer, no PFC, no congestion control, each QP with
/// at most `window` PSNs in flight.
fn lossy_incast(nic: NicConfig) -> roce_sim::Series {
    use roce_sim::scenario::{Flow, run};
    let scenario = roce_sim::Scenario {
        name: "incast-lossy".into(),
        hosts: 9,
        switch: roce_sim::SwitchConfig {
            bandwidth_bps: 10_000_000_000,
            latency: Duration::from_micros(1),
            buffer_bytes: 100_000,
            ..roce_sim::SwitchConfig::default()
        },
        nic,
        flows: (0..8)
            .map(|from| Flow {
                from,
                to: 8,
                bytes: Some(1 << 20),
                start: Duration::ZERO,
                dscp: 26,
            })
            .collect(),
        duration: Duration::from_millis(20),
        interval: Duration::from_micros(500),
        bottleneck: 8,
        ..roce_sim::Scenario::default()
    };
    run(&scenario).unwrap()
}

#[test]
fn a_lossy_incast_capped_near_its_bdp_finishes_and_sends_again_about_what_it_lost() {
    let sr = lossy_incast(selective(16));
    let drops = roce_sim::Series::total(&sr.drops);
    let finished: Vec<_> = sr.flows.iter().map(|f| f.finished).collect();
    println!(
        "selective repeat, cap 16: {drops} drops, {} sent again, finished {finished:?}",
        sr.retransmitted_packets
    );
    assert!(drops > 50, "the port dropped");
    assert!(finished.iter().all(Option::is_some), "{finished:?}");
    assert!(sr.retransmitted_packets <= 2 * drops);
    // Go-back-N with the same window (asking for an ACK twice per window) finishes too, but
    // each loss sends the rest of its window again.
    let gbn = lossy_incast(NicConfig {
        max_unacked_psns: 16,
        ..NicConfig::default()
    });
    let gbn_finished: Vec<_> = gbn.flows.iter().map(|f| f.finished).collect();
    assert!(gbn_finished.iter().all(Option::is_some), "{gbn_finished:?}");
    assert!(
        gbn.retransmitted_packets > 2 * sr.retransmitted_packets,
        "go-back-N sent again {}, selective repeat {}",
        gbn.retransmitted_packets,
        sr.retransmitted_packets
    );
}
