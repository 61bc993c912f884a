//! The QP table: a NIC's QPs by QPN, each found in one probe.
//!
//! QPNs are handed out in sequence (`objects::Ids`), so the table indexes them by their low
//! bits: an open-addressed index of `(QPN, slot)` pairs with linear probing, at most half full,
//! over a dense vector of the QPs themselves. A lookup reads one index entry (the QPs in use
//! have nearly consecutive QPNs, so their entries sit at or next to their home positions) and
//! then the QP. Every packet in and out looks its QP up, and the table it replaces, a
//! `BTreeMap`, read a node's keys at each of its levels and kept the QPs inside its nodes,
//! moving them on every insertion and removal before them.
//!
//! Removal shifts the entries after the hole back towards their home positions (Knuth, TAOCP
//! vol. 3, §6.4, Algorithm R), so no tombstone is left to lengthen later probes, and moves the
//! last QP into the freed slot. The order of [`QpTable::values`] is therefore no order the
//! NIC may rely on; nothing does (only minima are taken over it).

use roce_wire::Qpn;

use crate::qp::Qp;

/// The index's size at first: a power of two, and enough for the 8 QPs most programs have.
const FIRST_CAPACITY: usize = 16;

/// An index entry's `qpn` when it holds no QP (no QPN has more than 24 bits).
const EMPTY: u32 = u32::MAX;

/// One index entry: a QPN and its QP's place in the dense vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    qpn: u32,
    slot: u32,
}

const VACANT: Entry = Entry {
    qpn: EMPTY,
    slot: 0,
};

/// A NIC's QPs by QPN.
pub(crate) struct QpTable {
    /// Open-addressed by the QPN's low bits, linear probing; its length a power of two, at
    /// least twice the QPs held.
    index: Vec<Entry>,
    /// The QPs, densely: a removal moves the last one into its slot.
    qps: Vec<Qp>,
}

impl Default for QpTable {
    fn default() -> Self {
        Self {
            index: vec![VACANT; FIRST_CAPACITY],
            qps: Vec::new(),
        }
    }
}

impl std::fmt::Debug for QpTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.qps.iter().map(|qp| (qp.qpn, qp)))
            .finish()
    }
}

impl QpTable {
    /// QPs held.
    pub(crate) fn len(&self) -> usize {
        self.qps.len()
    }

    /// Whether `qpn` names a QP held.
    pub(crate) fn contains_key(&self, qpn: &Qpn) -> bool {
        self.find(*qpn).is_some()
    }

    /// The QP `qpn` names.
    #[inline]
    pub(crate) fn get(&self, qpn: &Qpn) -> Option<&Qp> {
        let at = self.find(*qpn)?;
        Some(&self.qps[self.index[at].slot as usize])
    }

    /// The QP `qpn` names, to change.
    #[inline]
    pub(crate) fn get_mut(&mut self, qpn: &Qpn) -> Option<&mut Qp> {
        let at = self.find(*qpn)?;
        Some(&mut self.qps[self.index[at].slot as usize])
    }

    /// Every QP held, in no particular order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Qp> {
        self.qps.iter()
    }

    /// Holds `qp` under `qpn`, which names none yet (the NIC draws QPNs not in use).
    pub(crate) fn insert(&mut self, qpn: Qpn, qp: Qp) {
        debug_assert!(!self.contains_key(&qpn), "QPN {qpn} is in use");
        debug_assert_eq!(qp.qpn, qpn);
        if 2 * (self.qps.len() + 1) > self.index.len() {
            self.grow();
        }
        let slot = u32::try_from(self.qps.len()).expect("fewer than 2^32 QPs");
        self.qps.push(qp);
        self.place(Entry {
            qpn: qpn.value(),
            slot,
        });
    }

    /// Takes out the QP `qpn` names.
    pub(crate) fn remove(&mut self, qpn: &Qpn) -> Option<Qp> {
        let at = self.find(*qpn)?;
        let slot = self.index[at].slot as usize;
        self.vacate(at);
        let qp = self.qps.swap_remove(slot);
        // The last QP moved into the slot: its entry follows it.
        if let Some(moved) = self.qps.get(slot) {
            let entry = self.find(moved.qpn).expect("every QP held has an entry");
            self.index[entry].slot = slot as u32;
        }
        Some(qp)
    }

    /// The index entry of `qpn`, if it is held.
    #[inline]
    fn find(&self, qpn: Qpn) -> Option<usize> {
        let mask = self.index.len() - 1;
        let mut at = qpn.value() as usize & mask;
        // Ends: the index is at most half full, so an empty entry comes.
        loop {
            let entry = self.index[at];
            if entry.qpn == qpn.value() {
                return Some(at);
            }
            if entry.qpn == EMPTY {
                return None;
            }
            at = (at + 1) & mask;
        }
    }

    /// Puts `entry` at the first empty place from its home position.
    fn place(&mut self, entry: Entry) {
        let mask = self.index.len() - 1;
        let mut at = entry.qpn as usize & mask;
        while self.index[at].qpn != EMPTY {
            at = (at + 1) & mask;
        }
        self.index[at] = entry;
    }

    /// Empties index entry `hole`, moving back each entry after it that may take its place
    /// (whose home position is not between the hole and where it is), up to the next empty
    /// entry: every entry stays reachable from its home position without a gap.
    fn vacate(&mut self, mut hole: usize) {
        let mask = self.index.len() - 1;
        let mut at = hole;
        loop {
            at = (at + 1) & mask;
            let entry = self.index[at];
            if entry.qpn == EMPTY {
                break;
            }
            let home = entry.qpn as usize & mask;
            // Distances going forward round the index: from its home to it, and from the
            // hole to it. The hole is on its probe path when it is no further from it than
            // its home is.
            if at.wrapping_sub(home) & mask >= at.wrapping_sub(hole) & mask {
                self.index[hole] = entry;
                hole = at;
            }
        }
        self.index[hole] = VACANT;
    }

    /// Doubles the index and places every entry again.
    fn grow(&mut self) {
        let doubled = vec![VACANT; 2 * self.index.len()];
        let old = std::mem::replace(&mut self.index, doubled);
        for entry in old.into_iter().filter(|e| e.qpn != EMPTY) {
            self.place(entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cq::CqHandle;
    use crate::mr::PdHandle;
    use crate::qp::QpInit;
    use crate::qp::QpType;
    use std::collections::BTreeMap;

    fn qp(qpn: u32) -> Qp {
        let init = QpInit::new(QpType::Rc, PdHandle(1), CqHandle(1), 16);
        Qp::new(Qpn::new(qpn), &init)
    }

    fn qpns(table: &QpTable) -> Vec<u32> {
        let mut all: Vec<u32> = table.values().map(|qp| qp.qpn.value()).collect();
        all.sort_unstable();
        all
    }

    #[test]
    fn a_qp_held_is_found_by_its_qpn_and_no_other() {
        let mut table = QpTable::default();
        table.insert(Qpn::new(0x11), qp(0x11));
        table.insert(Qpn::new(0x12), qp(0x12));
        assert_eq!(
            table.get(&Qpn::new(0x11)).map(|q| q.qpn),
            Some(Qpn::new(0x11))
        );
        assert_eq!(
            table.get(&Qpn::new(0x12)).map(|q| q.qpn),
            Some(Qpn::new(0x12))
        );
        assert!(table.get(&Qpn::new(0x13)).is_none());
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn qpns_with_the_same_low_bits_are_told_apart_and_survive_each_others_removal() {
        let mut table = QpTable::default();
        // All three share a home position in an index of 16.
        for qpn in [0x101, 0x201, 0x301] {
            table.insert(Qpn::new(qpn), qp(qpn));
        }
        // The first one's removal leaves the other two reachable (shifted back, not lost
        // behind a gap).
        assert_eq!(
            table.remove(&Qpn::new(0x101)).map(|q| q.qpn.value()),
            Some(0x101)
        );
        assert!(table.get(&Qpn::new(0x101)).is_none());
        assert_eq!(
            table.get(&Qpn::new(0x201)).map(|q| q.qpn.value()),
            Some(0x201)
        );
        assert_eq!(
            table.get(&Qpn::new(0x301)).map(|q| q.qpn.value()),
            Some(0x301)
        );
        assert_eq!(qpns(&table), [0x201, 0x301]);
    }

    #[test]
    fn removing_what_is_not_held_changes_nothing() {
        let mut table = QpTable::default();
        table.insert(Qpn::new(7), qp(7));
        let before = table.index.clone();
        assert!(table.remove(&Qpn::new(8)).is_none());
        assert_eq!(table.index, before);
        assert_eq!(qpns(&table), [7]);
    }

    #[test]
    fn the_index_grows_to_stay_at_most_half_full() {
        let mut table = QpTable::default();
        for qpn in 0x40..0x40 + 100 {
            table.insert(Qpn::new(qpn), qp(qpn));
            assert!(2 * table.len() <= table.index.len());
        }
        assert!((0x40..0x40 + 100).all(|qpn| table.contains_key(&Qpn::new(qpn))));
    }

    proptest::proptest! {
        /// Any sequence of insertions and removals leaves the table holding what a `BTreeMap`
        /// given the same sequence holds.
        #[test]
        fn it_holds_what_a_btreemap_holds(
            ops in proptest::collection::vec((proptest::bool::ANY, 0u32..96), 1..300)
        ) {
            let mut table = QpTable::default();
            let mut model = BTreeMap::new();
            for (insert, n) in ops {
                // Three low nibbles only: many QPNs share a home while the index is small.
                let qpn = Qpn::new(0x1000 + n * 16 + n % 3);
                if insert && !model.contains_key(&qpn) {
                    table.insert(qpn, qp(qpn.value()));
                    model.insert(qpn, ());
                } else if !insert {
                    let removed = table.remove(&qpn).map(|q| q.qpn);
                    proptest::prop_assert_eq!(removed, model.remove(&qpn).map(|()| qpn));
                }
                for key in model.keys() {
                    proptest::prop_assert_eq!(table.get(key).map(|q| q.qpn), Some(*key));
                }
                proptest::prop_assert_eq!(table.contains_key(&qpn), model.contains_key(&qpn));
                proptest::prop_assert_eq!(table.len(), model.len());
            }
            let held: Vec<u32> = model.keys().map(|q| q.value()).collect();
            proptest::prop_assert_eq!(qpns(&table), held);
        }
    }
}
