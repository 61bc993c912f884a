//! Packing the engine's transmits into segmentation-offload batches: packets that leave from
//! and go to the same addresses with the same header fields, all of one size but the last, are
//! written one after the other into one buffer and given to the backend in one send. Packet `i`
//! of a batch is built for the IPv4 identification `i`, the ID the kernel gives that segment.

use roce_core::Transmit;

/// The most bytes of UDP payload one batch carries: a UDP datagram's limit over IPv4 (65 535
/// less the IPv4 and UDP headers), which is also what the kernel takes for one GSO send.
pub(crate) const MAX_BATCH_BYTES: usize = 65_507;

/// The batch being built: which transmit its packets share, and how far it is filled.
#[derive(Debug)]
pub(crate) struct TxBatch {
    head: Option<Transmit>,
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

    /// Whether a packet described by `transmit`, written at [`TxBatch::len`], can join.
    pub(crate) fn fits(&self, transmit: &Transmit) -> bool {
        let Some(head) = &self.head else {
            return true;
        };
        !self.closed
            && self.count < self.max_segments
            && transmit.len <= self.segment
            && self.len + transmit.len <= MAX_BATCH_BYTES
            && (transmit.src, transmit.src_port, transmit.dst)
                == (head.src, head.src_port, head.dst)
            && (transmit.ecn, transmit.dscp, transmit.ttl) == (head.ecn, head.dscp, head.ttl)
    }

    /// Adds the packet just written at [`TxBatch::len`].
    pub(crate) fn push(&mut self, transmit: Transmit) {
        if self.head.is_none() {
            self.segment = transmit.len;
            self.head = Some(transmit);
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
            assert!(batch.fits(&transmit(4112, 2)));
            batch.push(transmit(4112, 2));
        }
        assert!(!batch.fits(&transmit(4112, 3)), "another peer");
        assert!(!batch.fits(&transmit(4200, 2)), "a longer packet");
        assert!(batch.fits(&transmit(20, 2)));
        batch.push(transmit(20, 2));
        assert!(batch.is_full() && !batch.fits(&transmit(20, 2)));
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
            batch.push(transmit(100, 2));
        }
        assert!(batch.is_full() && !batch.fits(&transmit(100, 2)));
        let mut batch = TxBatch::new(64);
        for _ in 0..15 {
            assert!(!batch.is_full());
            batch.push(transmit(4124, 2));
        }
        // A 16th would pass 65 507 bytes.
        assert!(batch.is_full() && !batch.fits(&transmit(4124, 2)));
    }

    #[test]
    fn without_offload_every_packet_is_a_batch_of_its_own() {
        let mut batch = TxBatch::new(1);
        batch.push(transmit(100, 2));
        assert!(batch.is_full() && !batch.fits(&transmit(100, 2)));
    }
}
