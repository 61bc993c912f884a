//! The outbox lending payloads: each batch, gathered as the kernel gathers it, is the copying
//! outbox's byte for byte, a packet carried into the next batch (and sealed again for its new
//! IPv4 identification) included.

use roce_core::{Remote, SendOp, SendWr, Sge, Transmit};

use super::Outbox;
use crate::backend::fill_loans;
use crate::engine::EngineLock;

/// The path MTU of `Connect::rc`.
const MTU: u32 = 1024;

/// Every batch the outbox makes of what the engine has: its transmit, its bytes as they leave
/// (the loans gathered in), its segment size, and how many loans it had at which places.
fn batches(
    engine: &EngineLock,
    outbox: &mut Outbox,
) -> Vec<(Transmit, Vec<u8>, usize, Vec<usize>)> {
    let mut out = Vec::new();
    let now = roce_core::Instant::from_micros(0);
    outbox.begin(&std::sync::atomic::AtomicBool::new(false), 1000);
    while let Some((transmit, payload, segment, loans)) = outbox.next_batch(engine, now) {
        let mut bytes = payload.to_vec();
        fill_loans(&mut bytes, loans);
        let places = loans.iter().map(|loan| loan.at).collect();
        out.push((transmit, bytes, segment, places));
    }
    out
}

#[test]
fn lent_batches_gather_into_the_copied_ones_and_a_carried_packet_is_sealed_again() {
    let pattern: Vec<u8> = (0..65536u32).map(|i| (i * 31 + 7) as u8).collect();
    let [lent, copied] = [true, false].map(|lending| {
        let (mut nic, qpn, mr) = crate::driver::tests::responder(pattern.len());
        assert!(mr.write(0, &pattern));
        let sge = |offset: u32, length: u32| Sge {
            addr: mr.addr() + u64::from(offset),
            length,
            lkey: mr.lkey(),
        };
        // A SEND of three full packets, then a WRITE: its FIRST packet is 16 bytes longer
        // (the RETH), so it cannot join the SEND's batch and starts the next one as
        // segment 0, sealed again for IPv4 ID 0 instead of the 3 it was built for.
        let send = SendWr::new(1, SendOp::Send, sge(0, 3 * MTU));
        let remote = Remote {
            addr: 0x1000,
            rkey: 7,
        };
        let write = SendWr::new(2, SendOp::RdmaWrite(remote), sge(5000, 2 * MTU + 100));
        nic.post_send(qpn, send).unwrap();
        nic.post_send(qpn, write).unwrap();
        let engine = EngineLock::new(nic);
        batches(&engine, &mut Outbox::new(64, None, lending))
    });
    assert_eq!(
        lent.len(),
        3,
        "the SEND's batch, the WRITE's FIRST and MIDDLE, its LAST"
    );
    for ((t, bytes, segment, _), (u, copy, useg, places)) in lent.iter().zip(&copied) {
        assert_eq!((t, segment), (u, useg));
        assert_eq!(bytes, copy, "the gathered batch is the copied one");
        assert!(places.is_empty(), "the copying outbox lent");
        // Packet i of a batch leaves with the IPv4 identification i: its ICRC is for that.
        let src = std::net::SocketAddr::new(t.src, t.src_port);
        for (i, packet) in bytes.chunks(*segment).enumerate() {
            let header = roce_wire::PseudoHeader::for_datagram(src, t.dst, i as u16).unwrap();
            assert_eq!(
                roce_wire::icrc::verify(&header, packet),
                Ok(()),
                "packet {i} of a batch of {segment}-byte segments"
            );
        }
    }
    // Every full packet's payload was lent, one loan each: the SEND's after their BTHs, the
    // WRITE's FIRST after its BTH and RETH at the start of its batch, its MIDDLE (shorter: it
    // ends the batch) after it. Its LAST, in a batch of its own, carries 100 bytes: copied.
    let packet = (12 + MTU + 4) as usize;
    assert_eq!(lent[0].3, [12, packet + 12, 2 * packet + 12]);
    assert_eq!(lent[1].3, [28, packet + 16 + 12]);
    assert!(lent[2].3.is_empty());
}

/// Three QPs to one peer address whose NIC two processes share: two to QPs of the peer's slot
/// 5, one to its slot 9. The receiving kernel steers a batch whole by its first packet, so no
/// batch mixes the slots; the two QPs of slot 5 may share one.
#[test]
fn a_batch_carries_packets_for_one_slot_of_the_peer() {
    use crate::driver::tests::{PEER, US};
    use roce_core::{Access, AddressVector, Connect, QpInit, QpType};
    use roce_wire::{Psn, Qpn};
    let mut nic = crate::driver::tests::nic();
    let pd = nic.alloc_pd();
    let cq = nic.create_cq(16);
    let mr = nic.reg_mr(pd, 3 * MTU as usize, Access::ALL).unwrap();
    let sge = Sge {
        addr: mr.addr(),
        length: 3 * MTU,
        lkey: mr.lkey(),
    };
    for (wr_id, remote) in [(1, 0x05_0042), (2, 0x09_0042), (3, 0x05_0043)] {
        let qpn = nic.create_qp(&QpInit::new(QpType::Rc, pd, cq, 16)).unwrap();
        let connect = Connect::rc(
            AddressVector::new(US, PEER),
            Qpn::new(remote),
            Psn::new(0),
            Psn::new(0),
        );
        nic.connect_qp(qpn, &connect).unwrap();
        nic.post_send(qpn, SendWr::new(wr_id, SendOp::Send, sge))
            .unwrap();
    }
    let engine = EngineLock::new(nic);
    let made = batches(&engine, &mut Outbox::new(64, None, false));
    let slots: Vec<Vec<u8>> = made
        .iter()
        .map(|(_, bytes, segment, _)| bytes.chunks(*segment).map(|p| p[5]).collect())
        .collect();
    assert_eq!(slots.iter().map(Vec::len).sum::<usize>(), 9, "{slots:?}");
    for batch in &slots {
        assert!(
            batch.iter().all(|&s| s == batch[0]),
            "a batch of two slots: {slots:?}"
        );
    }
    assert!(slots.len() >= 2, "{slots:?}");
}
