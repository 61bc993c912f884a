//! A peer that sends the CM whatever it likes: well-formed headers over random message bodies,
//! aimed at connections in every state. Nothing panics, every MAD is counted, and the CM keeps
//! within its bounds.

use roce_wire::mad::cm::Attr;
use roce_wire::mad::{CM_CLASS_VERSION, MAD_LEN, METHOD_SEND, MGMT_CLASS_CM};

use super::tests::Net;

/// A small deterministic generator (xorshift64*).
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

const ATTRS: [Attr; 8] = [
    Attr::Req,
    Attr::Mra,
    Attr::Rej,
    Attr::Rep,
    Attr::Rtu,
    Attr::Dreq,
    Attr::Drep,
    Attr::SidrReq,
];

#[test]
fn random_cm_messages_at_connections_in_every_state_never_panic_and_are_all_counted() {
    let mut draws = Draws(0x5eed_cafe);
    let mut sent = 0;
    for round in 0..20 {
        let mut net = Net::new();
        let (a_conn, b_conn) = net.establish();
        // Some rounds hit the connections while they close, or in timewait.
        if round % 3 == 1 {
            net.a.nic.cm_disconnect(net.now, a_conn).unwrap();
            net.pump();
        }
        if round % 3 == 2 {
            net.a.nic.cm_disconnect(net.now, a_conn).unwrap();
            net.pump();
            net.b.nic.cm_disconnect(net.now, b_conn).unwrap();
            net.pump();
        }
        let before = net.b.nic.stats().cm_rx_mads;
        let a_before = net.a.nic.stats().tx_gsi_mads;
        for _ in 0..100 {
            let mut mad = [0u8; MAD_LEN];
            for chunk in mad.chunks_mut(8) {
                let bytes = draws.next().to_be_bytes();
                chunk.copy_from_slice(&bytes[..chunk.len()]);
            }
            mad[0] = 1;
            mad[1] = MGMT_CLASS_CM;
            mad[2] = CM_CLASS_VERSION;
            mad[3] = METHOD_SEND;
            let attr = ATTRS[(draws.next() % ATTRS.len() as u64) as usize];
            mad[16..18].copy_from_slice(&attr.id().to_be_bytes());
            // Half of them name b's connection and a's, as a peer that watched the wire would.
            if draws.next() & 1 == 0 {
                mad[24..28].copy_from_slice(&a_conn.0.to_be_bytes());
                mad[28..32].copy_from_slice(&b_conn.0.to_be_bytes());
            }
            net.mad_from_a(mad);
            sent += 1;
            net.pump();
        }
        while net.tick() {}
        // b took every MAD a sent: the 100 and whatever a's CM sent again on its own.
        let taken = net.b.nic.stats().cm_rx_mads - before;
        assert_eq!(
            taken,
            net.a.nic.stats().tx_gsi_mads - a_before,
            "round {round}"
        );
        assert!(taken >= 100);
        assert!(net.b.nic.cm_conns() <= super::MAX_CM_CONNS);
        assert_eq!(
            net.b.nic.poll_timeout(),
            None,
            "round {round}: nothing waits for ever"
        );
    }
    assert_eq!(sent, 2000);
}

/// A flood of REQs for a service nobody offers holds no more than `MAX_PARKED` of them a
/// moment (parked.rs): the rest are rejected at once, as ib_cm rejects them, and the held ones
/// when their grace is over.
#[test]
fn a_flood_of_requests_for_a_service_nobody_offers_is_held_only_so_far() {
    use super::parked::MAX_PARKED;
    let mut net = Net::new();
    net.connect(b"");
    let req = net
        .log
        .iter()
        .find(|s| s.from == 'a' && s.attr == Attr::Req)
        .unwrap()
        .mad;
    for i in 1..=100u32 {
        let mut mad = req;
        // The REQ's local comm ID: another requester each time.
        mad[24..28].copy_from_slice(&(0x1000_0000 + i).to_be_bytes());
        net.mad_from_a(mad);
    }
    net.pump();
    let stats = net.b.nic.stats();
    assert_eq!(stats.cm_rx_req_held, MAX_PARKED as u64);
    assert_eq!(stats.cm_rx_no_listener, 101 - MAX_PARKED as u64);
    assert_eq!(net.sent('b', Attr::Rej), 101 - MAX_PARKED);
    while net.tick() {}
    assert_eq!(
        net.sent('b', Attr::Rej),
        101,
        "every one rejected in the end"
    );
    assert_eq!(net.b.nic.stats().cm_rx_no_listener, 101);
}
