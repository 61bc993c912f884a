//! A NIC that several engines share, one per process (`NicConfig::slot`). Each engine names its
//! objects within its slot's range, so that what a packet names tells which engine it is for:
//! a QPN is `slot << 16 | n` (65 536 per slot), a memory key, a CM comm ID and a SIDR request
//! ID carry the slot in their top byte. The device steers every datagram by these (the BTH's
//! DestQP; for QP 1, the comm ID or request ID of ours that a CM message names back), and QP 1's
//! REQs by the service ID of a listener.

/// Where a QPN's slot starts.
pub const QPN_SLOT_SHIFT: u32 = 16;

/// Where the slot of a memory key, a comm ID or a SIDR request ID starts.
pub const ID_SLOT_SHIFT: u32 = 24;

/// The slot whose engine owns `qpn` on a shared NIC.
pub const fn slot_of_qpn(qpn: u32) -> u8 {
    ((qpn >> QPN_SLOT_SHIFT) & 0xff) as u8
}

/// The slot whose engine made `id` (a memory key, comm ID or SIDR request ID) on a shared NIC.
pub const fn slot_of_id(id: u32) -> u8 {
    (id >> ID_SLOT_SHIFT) as u8
}

/// `qpn` moved into `slot`'s range, or unchanged for an engine that is the whole NIC.
pub(crate) fn qpn_in(slot: Option<u8>, qpn: u32) -> u32 {
    match slot {
        Some(slot) => u32::from(slot) << QPN_SLOT_SHIFT | (qpn & ((1 << QPN_SLOT_SHIFT) - 1)),
        None => qpn & 0x00ff_ffff,
    }
}

/// `id` moved into `slot`'s range, or unchanged for an engine that is the whole NIC.
pub(crate) fn id_in(slot: Option<u8>, id: u32) -> u32 {
    match slot {
        Some(slot) => u32::from(slot) << ID_SLOT_SHIFT | (id & ((1 << ID_SLOT_SHIFT) - 1)),
        None => id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::ConnectParams;
    use crate::{Access, Instant, Nic, NicConfig, Psn, QpInit, QpType};

    /// Everything an engine in slot 3 names is in slot 3's range: what the device steers by.
    #[test]
    fn an_engine_in_a_slot_names_its_qps_keys_and_connections_in_it() {
        let local = "198.18.0.1".parse().unwrap();
        let mut nic = Nic::new(NicConfig {
            addrs: vec![local],
            slot: Some(3),
            seed: 0x5eed,
            ..NicConfig::default()
        });
        let pd = nic.alloc_pd();
        let cq = nic.create_cq(16);
        for _ in 0..3 {
            let qpn = nic.create_qp(&QpInit::new(QpType::Rc, pd, cq, 16)).unwrap();
            assert_eq!(slot_of_qpn(qpn.value()), 3, "{qpn}");
            assert!(qpn.value() & 0xffff > 1);
        }
        let mr = nic.reg_mr(pd, 4096, Access::ALL).unwrap();
        assert_eq!((slot_of_id(mr.lkey()), slot_of_id(mr.rkey())), (3, 3));
        let qpn = nic.create_qp(&QpInit::new(QpType::Rc, pd, cq, 16)).unwrap();
        let peer = "198.18.0.2".parse().unwrap();
        let params = ConnectParams::new(qpn, local, peer, 0x0106_0000_4791, Psn::new(7));
        let conn = nic.cm_connect(Instant::ZERO, &params).unwrap();
        assert_eq!(slot_of_id(conn.0), 3);
    }

    /// Without a slot the engine keeps the whole spaces: its first QPN is where it always was.
    #[test]
    fn a_whole_nic_is_not_confined_to_a_slot() {
        let config = NicConfig {
            seed: 0x5eed,
            ..NicConfig::default()
        };
        let mut whole = Nic::new(config.clone());
        let mut slot0 = Nic::new(NicConfig {
            slot: Some(0),
            ..config
        });
        let qp = |nic: &mut Nic| {
            let pd = nic.alloc_pd();
            let cq = nic.create_cq(4);
            nic.create_qp(&QpInit::new(QpType::Ud, pd, cq, 4)).unwrap()
        };
        // The draw lies below 0x1011: slot 0 gives the same QPN, the whole NIC does too.
        assert_eq!(qp(&mut whole), qp(&mut slot0));
        let mut slot9 = Nic::new(NicConfig {
            slot: Some(9),
            seed: 0x5eed,
            ..NicConfig::default()
        });
        assert_eq!(
            qp(&mut slot9).value(),
            9 << 16
                | qp(&mut Nic::new(NicConfig {
                    seed: 0x5eed,
                    ..NicConfig::default()
                }))
                .value()
        );
    }

    #[test]
    fn a_slot_is_read_back_from_what_it_names() {
        for slot in [0u8, 1, 7, 255] {
            let qpn = qpn_in(Some(slot), 0xab_1234);
            assert_eq!((slot_of_qpn(qpn), qpn & 0xffff), (slot, 0x1234));
            let id = id_in(Some(slot), 0xdead_beef);
            assert_eq!((slot_of_id(id), id & 0xff_ffff), (slot, 0xad_beef));
        }
        assert_eq!(qpn_in(None, 0xab_1234), 0xab_1234);
        assert_eq!(id_in(None, 0xdead_beef), 0xdead_beef);
    }
}
