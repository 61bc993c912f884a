//! `roce perf --check`: every byte that arrives is the byte that was sent.
//!
//! Both sides always fill their buffers with seeded patterns before the test: each QP's send
//! half (what its SENDs and WRITEs carry) with the pattern of its own QPN, its receive half
//! (what the peer's READs fetch) with another pattern of the same QPN. The side that receives
//! then checks, with `--check`:
//! - READ: the client, after every completion, the bytes that landed in the QP's buffer
//!   against the server's receive-half pattern;
//! - SEND: the server, after every completion, the receive buffer against the client's
//!   send-half pattern;
//! - WRITE: the server, once the test is over (a WRITE's target sees no completion), the
//!   receive half against the client's send-half pattern, so that the last message of each QP
//!   is checked whole; earlier ones wrote the same bytes to the same place.
//!
//! Every message of a perftest-style run carries the same bytes (perftest sends one buffer
//! again and again), so a check sees any damage that lands, and a WRITE that never landed
//! leaves the server's own pattern in place, which fails. The seed is the source QP's number,
//! which both sides learn in the key exchange.

use roce_core::{MemoryRegion, Qpn, Sge};

/// The half of a QP's buffer a pattern is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Half {
    /// What the QP sends (SEND, WRITE).
    Send,
    /// What the peer READs.
    Receive,
}

/// `len` bytes of the pattern of `qpn`'s `half`: xorshift64 from a seed that mixes both.
pub(super) fn pattern(qpn: Qpn, half: Half, len: usize) -> Vec<u8> {
    let salt = match half {
        Half::Send => 0x5345_4e44,
        Half::Receive => 0x5245_4356,
    };
    let mut x = (u64::from(qpn.value()) << 32 | salt).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Fills each QP's halves of `mr` (QP `i` sends from half `i`, its receive half is `qps + i`,
/// each `half` bytes) with its patterns.
pub(super) fn fill(mr: &MemoryRegion, qpns: &[Qpn], half: usize) {
    let qps = qpns.len();
    for (i, &qpn) in qpns.iter().enumerate() {
        mr.write(i * half, &pattern(qpn, Half::Send, half));
        mr.write((qps + i) * half, &pattern(qpn, Half::Receive, half));
    }
}

/// What was checked, and the first difference found.
#[derive(Debug, Default)]
pub(super) struct Checked {
    /// Messages checked whole.
    pub(super) messages: u64,
    /// Bytes checked.
    pub(super) bytes: u64,
}

/// The first byte of a message that differs from what was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--check: QP {qp} ({qpn}), message {message}: byte {offset} is {got:#04x} where {sent:#04x} was sent (pattern of the peer's QP {peer})"
)]
pub(super) struct Mismatch {
    pub(super) qp: usize,
    pub(super) qpn: Qpn,
    pub(super) message: u64,
    pub(super) offset: usize,
    pub(super) got: u8,
    pub(super) sent: u8,
    pub(super) peer: Qpn,
}

/// The receiving side's checker: the patterns it expects, by QP.
#[derive(Debug)]
pub(super) struct Checker {
    /// Our QPs and the peer's QP of each.
    qpns: Vec<(Qpn, Qpn)>,
    expected: Vec<Vec<u8>>,
    /// What landed, read out of the region for one check.
    scratch: Vec<u8>,
    pub(super) checked: Checked,
}

impl Checker {
    /// Expects, on QP `i`, the pattern of the peer's QP `peers[i]`'s `half`, `len` bytes long.
    pub(super) fn new(ours: &[Qpn], peers: &[Qpn], half: Half, len: usize) -> Self {
        Self {
            qpns: ours.iter().copied().zip(peers.iter().copied()).collect(),
            expected: peers.iter().map(|&p| pattern(p, half, len)).collect(),
            scratch: Vec::with_capacity(len),
            checked: Checked::default(),
        }
    }

    /// Checks the `sge.length` bytes at `sge` in `mr`: message `message` of QP `qp`.
    pub(super) fn check(
        &mut self,
        mr: &MemoryRegion,
        sge: Sge,
        qp: usize,
        message: u64,
    ) -> Result<(), Mismatch> {
        let len = sge.length as usize;
        let at = (sge.addr - mr.addr()) as usize;
        let expected = &self.expected[qp][..len];
        let (qpn, peer) = self.qpns[qp];
        // Read into a buffer of our own: the NIC goes on writing the other QPs' slots meanwhile,
        // so the region is only ever read here, never written back.
        self.scratch.resize(len, 0);
        let got = &mut self.scratch[..];
        assert!(mr.read_into(at, got), "the SGE lies inside the buffer");
        let found = (got != expected).then(|| {
            let offset = got
                .iter()
                .zip(expected)
                .position(|(g, e)| g != e)
                .expect("the slices differ");
            (offset, got[offset])
        });
        if let Some((offset, got)) = found {
            return Err(Mismatch {
                qp,
                qpn,
                message,
                offset,
                got,
                sent: expected[offset],
                peer,
            });
        }
        self.checked.messages += 1;
        self.checked.bytes += len as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use roce_core::{Access, Nic, NicConfig};

    use super::*;

    fn region(len: usize) -> MemoryRegion {
        let mut nic = Nic::new(NicConfig::default());
        let pd = nic.alloc_pd();
        nic.reg_mr(pd, len, Access::ALL).unwrap()
    }

    #[test]
    fn patterns_differ_by_qp_and_half_and_repeat_for_one_seed() {
        let (a, b) = (Qpn::new(0x11), Qpn::new(0x12));
        assert_eq!(pattern(a, Half::Send, 100), pattern(a, Half::Send, 100));
        assert_ne!(pattern(a, Half::Send, 100), pattern(b, Half::Send, 100));
        assert_ne!(pattern(a, Half::Send, 100), pattern(a, Half::Receive, 100));
        assert_eq!(
            pattern(a, Half::Send, 13),
            pattern(a, Half::Send, 100)[..13]
        );
    }

    #[test]
    fn what_the_peer_sent_passes_and_the_first_changed_byte_is_named() {
        let (ours, peer) = (Qpn::new(0x20), Qpn::new(0x31));
        let mr = region(4 * 64);
        fill(&mr, &[ours], 64);
        let mut checker = Checker::new(&[ours], &[peer], Half::Send, 64);
        let landing = Sge {
            addr: mr.addr() + 64,
            length: 64,
            lkey: mr.lkey(),
        };
        // Our own pattern is there, not the peer's: a WRITE that never landed fails.
        let err = checker.check(&mr, landing, 0, 0).unwrap_err();
        assert_eq!((err.qp, err.message, err.offset), (0, 0, 0));
        // The peer's bytes pass; one flipped byte is found where it is.
        mr.write(64, &pattern(peer, Half::Send, 64));
        checker.check(&mr, landing, 0, 1).unwrap();
        let mut bytes = pattern(peer, Half::Send, 64);
        bytes[37] ^= 0x10;
        mr.write(64, &bytes);
        let err = checker.check(&mr, landing, 0, 2).unwrap_err();
        assert_eq!((err.message, err.offset, err.got), (2, 37, bytes[37]));
        assert_eq!(err.sent, bytes[37] ^ 0x10);
        assert_eq!((checker.checked.messages, checker.checked.bytes), (1, 64));
        assert!(err.to_string().contains("byte 37"), "{err}");
    }
}
