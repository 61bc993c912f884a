//! Packing the engine's transmits into segmentation-offload batches: packets that leave from
//! and go to the same addresses with the same header fields, all of one size but the last, are
//! written one after the other into one buffer and given to the backend in one send. Packet `i`
//! of a batch is built for the IPv4 identification `i`, the ID the kernel gives that segment.
//!
//! A batch also goes to one process. The receiving host's kernel chooses the socket of a
//! `SO_REUSEPORT` group once per batch, on its first packet, and queues every packet of it
//! there (`udp_rcv_segment` splits it behind the choice), so on an address whose NIC several
//! processes share ([`crate::backend::steer`]) a packet for another process's QP in the same
//! batch reached the wrong engine, which dropped it as an unknown QP and left its sender to
//! time out. Packets join a batch only if the steering would send them where it sends the
//! first: the same slot in their DestQPs, and no CM MAD (QP 1, steered by what it names)
//! shares a batch. A peer that is no shared NIC (rxe, a NIC of its own) numbers its QPs in one
//! slot, so its batches are as long as before.

use roce_core::Transmit;

/// The most bytes of UDP payload one batch carries: a UDP datagram's limit over IPv4 (65 535
/// less the IPv4 and UDP headers), which is also what the kernel takes for one GSO send.
pub(crate) const MAX_BATCH_BYTES: usize = 65_507;

/// The batch being built: which transmit its packets share, and how far it is filled.
#[derive(Debug)]
pub(crate) struct TxBatch {
    head: Option<Transmit>,
    /// The slot the first packet's steering names (`None`: a CM MAD, which goes alone).
    slot: Option<u8>,
    /// Bytes written so far (where the next packet goes).
    len: usize,
    /// Packets so far.
    count: usize,
    /// The size of every packet but the last.
    segment: usize,
    /// A packet shorter than `segment` ended it.
    closed: bool,
    max_segments: usize,
}

impl TxBatch {
    pub(crate) fn new(max_segments: usize) -> Self {
        Self {
            head: None,
            slot: None,
            len: 0,
            count: 0,
            segment: 0,
            closed: false,
            max_segments: max_segments.max(1),
        }
    }

    /// Where the next packet is written.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The IPv4 identification the next packet leaves with, if it joins.
    pub(crate) fn next_ip_id(&self) -> u16 {
        u16::try_from(self.count).unwrap_or(u16::MAX)
    }

    /// Whether a packet described by `transmit`, written at [`TxBatch::len`] and steered to
    /// `slot` ([`crate::backend::steer::slot_of`]), can join.
    pub(crate) fn fits(&self, transmit: &Transmit, slot: Option<u8>) -> bool {
        let Some(head) = &self.head else {
            return true;
        };
        !self.closed
            && slot.is_some()
            && slot == self.slot
            && self.count < self.max_segments
            && transmit.len <= self.segment
            && self.len + transmit.len <= MAX_BATCH_BYTES
            && (transmit.src, transmit.src_port, transmit.dst)
                == (head.src, head.src_port, head.dst)
            && (transmit.ecn, transmit.dscp, transmit.ttl) == (head.ecn, head.dscp, head.ttl)
    }

    /// Adds the packet just written at [`TxBatch::len`], steered to `slot`.
    pub(crate) fn push(&mut self, transmit: Transmit, slot: Option<u8>) {
        if self.head.is_none() {
            self.segment = transmit.len;
            self.head = Some(transmit);
            self.slot = slot;
        } else if transmit.len < self.segment {
            self.closed = true;
        }
        self.len += transmit.len;
        self.count += 1;
    }

    /// Whether no further packet can join.
    pub(crate) fn is_full(&self) -> bool {
        self.closed || self.count >= self.max_segments || self.len + self.segment > MAX_BATCH_BYTES
    }

    /// Empties the batch: its shared transmit, its length in bytes and its segment size.
    pub(crate) fn take(&mut self) -> Option<(Transmit, usize, usize)> {
        let head = self.head.take()?;
        let taken = (head, self.len, self.segment);
        *self = Self::new(self.max_segments);
        Some(taken)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    use roce_core::Ecn;

    use super::*;

    impl TxBatch {
        /// A packet to a QP of slot 0, as every QP of a NIC of its own.
        fn fits_to(&self, transmit: &Transmit) -> bool {
            self.fits(transmit, Some(0))
        }
        fn push_to(&mut self, transmit: Transmit) {
            self.push(transmit, Some(0));
        }
    }

    fn transmit(len: usize, dst: u8) -> Transmit {
        Transmit {
            src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            src_port: 4791,
            dst: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, dst)), 4791),
            ecn: Ecn::NotEct,
            dscp: 0,
            ttl: 64,
            len,
        }
    }

    #[test]
    fn equal_packets_to_one_peer_share_a_batch_until_a_shorter_one_ends_it() {
        let mut batch = TxBatch::new(64);
        for id in 0..3 {
            assert_eq!(
                (batch.next_ip_id(), batch.len()),
                (id, usize::from(id) * 4112)
            );
            assert!(batch.fits_to(&transmit(4112, 2)));
            batch.push_to(transmit(4112, 2));
        }
        assert!(!batch.fits_to(&transmit(4112, 3)), "another peer");
        assert!(!batch.fits_to(&transmit(4200, 2)), "a longer packet");
        assert!(batch.fits_to(&transmit(20, 2)));
        batch.push_to(transmit(20, 2));
        assert!(batch.is_full() && !batch.fits_to(&transmit(20, 2)));
        let (head, len, segment) = batch.take().unwrap();
        assert_eq!(
            (head.dst, len, segment),
            (transmit(0, 2).dst, 3 * 4112 + 20, 4112)
        );
        assert_eq!((batch.len(), batch.next_ip_id()), (0, 0));
        assert!(batch.take().is_none());
    }

    #[test]
    fn a_batch_holds_at_most_max_segments_and_64_kib() {
        let mut batch = TxBatch::new(4);
        for _ in 0..4 {
            batch.push_to(transmit(100, 2));
        }
        assert!(batch.is_full() && !batch.fits_to(&transmit(100, 2)));
        let mut batch = TxBatch::new(64);
        for _ in 0..15 {
            assert!(!batch.is_full());
            batch.push_to(transmit(4124, 2));
        }
        // A 16th would pass 65 507 bytes.
        assert!(batch.is_full() && !batch.fits_to(&transmit(4124, 2)));
    }

    #[test]
    fn without_offload_every_packet_is_a_batch_of_its_own() {
        let mut batch = TxBatch::new(1);
        batch.push_to(transmit(100, 2));
        assert!(batch.is_full() && !batch.fits_to(&transmit(100, 2)));
    }

    #[test]
    fn packets_for_another_process_or_a_cm_mad_start_a_batch_of_their_own() {
        let mut batch = TxBatch::new(64);
        batch.push(transmit(1100, 2), Some(3));
        assert!(batch.fits(&transmit(1100, 2), Some(3)), "the same slot");
        assert!(
            !batch.fits(&transmit(1100, 2), Some(4)),
            "another slot's QP"
        );
        assert!(!batch.fits(&transmit(1100, 2), None), "a MAD");
        batch.push(transmit(1100, 2), Some(3));
        assert_eq!(batch.take().map(|(_, len, _)| len), Some(2200));
        // A MAD heads a batch that nothing joins.
        batch.push(transmit(300, 2), None);
        assert!(!batch.fits(&transmit(300, 2), None));
        assert!(!batch.fits(&transmit(300, 2), Some(0)));
    }
}
