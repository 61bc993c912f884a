//! More than two NICs: a full mesh of links, several QPs per NIC, traffic between every pair at
//! once, with targeted and random loss.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use roce_core::{Duration, Instant, NicConfig, Qpn, RecvWr, Remote, SendOp, SendWr, Sge, WcStatus};
use roce_sim::{LinkConfig, Net, PairConfig};
use roce_tests::sim::{drop_once, pattern};
use roce_wire::Psn;
use roce_wire::opcode::Opcode;

fn sge(net: &Net, node: usize, offset: u64, len: u32) -> Sge {
    let mr = &net.nodes[node].mr;
    Sge {
        addr: mr.addr() + offset,
        length: len,
        lkey: mr.lkey(),
    }
}

fn remote(net: &Net, node: usize, offset: u64) -> Remote {
    let mr = &net.nodes[node].mr;
    Remote {
        addr: mr.addr() + offset,
        rkey: mr.rkey(),
    }
}

fn post(net: &mut Net, node: usize, qpn: Qpn, wr: SendWr) {
    net.nodes[node].nic.post_send(qpn, wr).unwrap();
}

/// Node `i` writes 20 000 bytes (from offset 600 000 + 20 000 × j) into every other node j at
/// offset 100 000 × (i + 1): each
/// write lands in its own place.
fn all_to_all(n: usize, config: &PairConfig, setup: impl FnOnce(&mut Net)) -> Net {
    all_to_all_watched(n, config, setup, |_| {})
}

/// [`all_to_all`], with `watch` shown the network after every step.
fn all_to_all_watched(
    n: usize,
    config: &PairConfig,
    setup: impl FnOnce(&mut Net),
    mut watch: impl FnMut(&Net),
) -> Net {
    let mut net = Net::new(n, config);
    let mut qps = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            let (qi, qj) = net.connect(i, j);
            qps.push((i, qi, j));
            qps.push((j, qj, i));
        }
    }
    setup(&mut net);
    for (k, &(from, qpn, to)) in qps.iter().enumerate() {
        let data = pattern((from * 31 + to) as u64, 20_000);
        net.nodes[from].mr.write(600_000 + 20_000 * to, &data);
        let wr = SendWr::new(
            k as u64,
            SendOp::RdmaWrite(remote(&net, to, 100_000 * (from as u64 + 1))),
            vec![sge(&net, from, 600_000 + 20_000 * to as u64, 20_000)],
        );
        post(&mut net, from, qpn, wr);
    }
    let expected = n - 1;
    let done = net.drive_while(Instant::from_millis(500), |net| {
        watch(net);
        net.nodes
            .iter()
            .all(|node| node.nic.completions_waiting(node.cq) == expected)
    });
    assert!(done, "not every WRITE completed");
    for from in 0..n {
        let completions = net.nodes[from].completions();
        assert!(
            completions.iter().all(|c| c.status == WcStatus::Success),
            "{completions:?}"
        );
        for to in (0..n).filter(|&to| to != from) {
            let data = pattern((from * 31 + to) as u64, 20_000);
            let landed = net.nodes[to].mr.read(100_000 * (from + 1), 20_000).unwrap();
            assert!(landed == data, "{from} -> {to}: the bytes differ");
        }
    }
    net
}

#[test]
fn three_nodes_write_to_each_other_at_once() {
    let _log = roce_sim::trace_to_test_output();
    let net = all_to_all(3, &PairConfig::default(), |_| {});
    // One QP per peer on each node, numbered on from its unconnected default QP: the second,
    // to node 2, is two after it.
    let to_node_2 = Qpn::new(net.nodes[0].qpn.value() + 2);
    assert_eq!(
        net.nodes[0].nic.qp_psns(to_node_2).unwrap().0,
        Psn::new(20_000u32.div_ceil(1024))
    );
}

#[test]
fn a_lost_packet_on_one_link_does_not_disturb_the_others() {
    let net = all_to_all(3, &PairConfig::default(), |net| {
        net.link(0, 2).fail(drop_once(5));
    });
    assert_eq!(
        net.nodes[0].nic.stats().rx_nak_seq_err,
        1,
        "node 0 recovered with one NAK from node 2"
    );
    assert_eq!(net.nodes[1].nic.stats().retransmitted_packets, 0);
    assert_eq!(net.nodes[2].nic.stats().retransmitted_packets, 0);
}

#[test]
fn five_nodes_under_random_loss_over_seeds() {
    for seed in 0..8 {
        let link = LinkConfig {
            loss: 0.03,
            reorder_jitter: Duration::from_micros(2),
            ..LinkConfig::default()
        };
        let config = PairConfig {
            seed,
            link,
            timeout: 6,
            ..PairConfig::default()
        };
        all_to_all(5, &config, |_| {});
    }
}

#[test]
fn a_send_between_two_of_four_nodes_lands_in_the_receive() {
    let mut net = Net::new(4, &PairConfig::default());
    let (q1, q3) = net.connect(1, 3);
    net.nodes[1].mr.write(0, b"to node three");
    let recv = RecvWr {
        wr_id: 7,
        sgl: [sge(&net, 3, 64, 64)].into(),
    };
    net.nodes[3].nic.post_recv(q3, recv).unwrap();
    let send = SendWr::new(1, SendOp::Send, vec![sge(&net, 1, 0, 13)]);
    post(&mut net, 1, q1, send);
    assert!(net.drive_while(Instant::from_millis(10), |net| {
        net.nodes[3].nic.completions_waiting(net.nodes[3].cq) == 1
    }));
    assert_eq!(net.nodes[3].completion().unwrap().byte_len, 13);
    assert_eq!(net.nodes[3].mr.read(64, 13).unwrap(), b"to node three");
    assert!(
        net.link(0, 2).sent().is_empty(),
        "nothing crossed a link of two idle nodes"
    );
}

#[test]
fn a_small_budget_of_unacknowledged_packets_is_shared_and_every_write_completes() {
    // Each node's four QPs post 20 packets each at once; the NIC lets 6 be unacknowledged in
    // all: QPs wait for room, get it in turn, and every WRITE lands (also under loss, where
    // go-back-N gives packets back to the budget and takes them again).
    // Twelve seeds, without loss and with 3 % and 10 % (40 seeds pass too; 1 s in debug).
    for (seed, loss) in (0..12u64).map(|s| (s, [0.0, 0.03, 0.1][s as usize % 3])) {
        let config = PairConfig {
            seed,
            link: LinkConfig {
                loss,
                ..LinkConfig::default()
            },
            timeout: 6,
            nic: NicConfig {
                max_unacked_total: 6,
                ..NicConfig::default()
            },
            ..PairConfig::default()
        };
        let net = all_to_all(5, &config, |_| {});
        if loss == 0.0 {
            for node in &net.nodes {
                assert_eq!(node.nic.stats().retransmitted_packets, 0);
            }
        }
    }
}

#[test]
fn a_spent_budget_asks_for_acks_only_as_often_as_it_must() {
    // Five nodes, four QPs each, every QP writing 20 packets at once, in a budget of 32
    // unacknowledged packets per NIC. The packets in flight sent after their QP's last ACK
    // request never pass half the budget, so a full budget always holds packets whose ACKs
    // make room; and only as many requests ask for an ACK as that takes: 15 of each node's 80
    // (36 when every request asked once half the budget was spent).
    let config = PairConfig {
        nic: NicConfig {
            max_unacked_total: 32,
            ..NicConfig::default()
        },
        ..PairConfig::default()
    };
    let mut most = 0;
    let mut net = all_to_all_watched(
        5,
        &config,
        |_| {},
        |net| {
            for node in &net.nodes {
                most = most.max(node.nic.unacked_packets_without_ack_request());
            }
        },
    );
    assert!(
        (8..=16).contains(&most),
        "{most}: up to half the budget, never past it"
    );
    for i in 0..5 {
        assert_eq!(
            net.nodes[i].nic.stats().retransmitted_packets,
            0,
            "node {i}: nothing waited for a timeout"
        );
        let (mut requests, mut asking) = (0, 0);
        for j in (0..5).filter(|&j| j != i) {
            for sent in net.link(i, j).sent() {
                if sent
                    .opcode
                    .and_then(Opcode::layout)
                    .is_some_and(|l| l.is_request())
                {
                    requests += 1;
                    asking += usize::from(sent.ack_req == Some(true));
                }
            }
        }
        assert_eq!(requests, 80, "node {i}: four WRITEs of 20 packets");
        assert!(
            asking <= 20,
            "node {i}: {asking} of its {requests} requests asked for an ACK"
        );
    }
}
