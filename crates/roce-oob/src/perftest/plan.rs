//! The test plan: which perftest tool runs, and so how many key handshakes it does before
//! and after connecting its QPs and what its end exchanges.

use crate::OobError;

/// The RDMA operation a perftest tool measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `ib_send_bw`, `ib_send_lat`.
    Send,
    /// `ib_write_bw`, `ib_write_lat`.
    Write,
    /// `ib_read_bw`, `ib_read_lat`.
    Read,
    /// `ib_atomic_bw`, `ib_atomic_lat`.
    Atomic,
}

/// Bandwidth or latency tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `ib_*_bw`.
    Bandwidth,
    /// `ib_*_lat`.
    Latency,
}

/// Which perftest tool runs, which fixes the number and places of the key handshakes. For
/// one QP, not bidirectional (`-b`), one message size (no `-a`), from the tools' `main`s at
/// v4.5-0.17 (with `-q N` see below):
///
/// | tool | before connect | after connect (last = ready) | end |
/// |---|---|---|---|
/// | write/read/atomic bw | 1 | 2 | handshake, report, handshake, done |
/// | send bw | 1 | 3 (the last after posting receives) | handshake, done |
/// | write lat | 2 | 2 | nothing |
/// | read/atomic lat | 2 | 2 | handshake, done |
/// | send lat | 1 | 3 (the last after posting receives) | handshake, done |
///
/// With `-q N` (bandwidth tests only) the per-QP handshake becomes N, one per QP in QP order,
/// each message in the one-QP format with that QP's keys, before connect and again after
/// (`write_bw.c`, `send_bw.c`, `read_bw.c`, `atomic_bw.c`: `for (i=0; i < num_of_qps; i++)
/// ctx_hand_shake(&user_comm,&my_dest[i],&rem_dest[i])`); every other handshake is QP 0's.
/// So write/read/atomic bw: N before connect, N + 1 after; send bw: N before, 1 + N + 1 after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Test {
    /// The operation.
    pub verb: Verb,
    /// Bandwidth or latency.
    pub kind: Kind,
}

impl Test {
    /// `ib_write_bw`.
    pub const WRITE_BW: Self = Self::new(Verb::Write, Kind::Bandwidth);
    /// `ib_send_bw`.
    pub const SEND_BW: Self = Self::new(Verb::Send, Kind::Bandwidth);
    /// `ib_read_bw`.
    pub const READ_BW: Self = Self::new(Verb::Read, Kind::Bandwidth);
    /// `ib_atomic_bw`.
    pub const ATOMIC_BW: Self = Self::new(Verb::Atomic, Kind::Bandwidth);
    /// `ib_write_lat`.
    pub const WRITE_LAT: Self = Self::new(Verb::Write, Kind::Latency);
    /// `ib_send_lat`.
    pub const SEND_LAT: Self = Self::new(Verb::Send, Kind::Latency);
    /// `ib_read_lat`.
    pub const READ_LAT: Self = Self::new(Verb::Read, Kind::Latency);
    /// `ib_atomic_lat`.
    pub const ATOMIC_LAT: Self = Self::new(Verb::Atomic, Kind::Latency);

    /// The test of `verb` and `kind`.
    pub const fn new(verb: Verb, kind: Kind) -> Self {
        Self { verb, kind }
    }

    /// Key handshakes before the QP is connected: the latency tools other than send do an
    /// extra one (`ctx_hand_shake(my_dest)` before the per-QP loop).
    pub fn handshakes_before_connect(self) -> usize {
        match (self.kind, self.verb) {
            (Kind::Latency, Verb::Write | Verb::Read | Verb::Atomic) => 2,
            _ => 1,
        }
    }

    /// Key handshakes after the QP is connected and before traffic, the last being the
    /// "ready" sync: send tests do one on QP 0, the per-QP one, and one after posting their
    /// receives; the others the per-QP one and "an additional handshake ... after moving qp
    /// to RTR".
    pub fn handshakes_after_connect(self) -> usize {
        match self.verb {
            Verb::Send => 3,
            _ => 2,
        }
    }

    /// Whether the end has the report exchange: one-way write, read and atomic bandwidth tests
    /// (a handshake, the report, then the close).
    pub fn exchanges_report(self) -> bool {
        self.kind == Kind::Bandwidth && self.verb != Verb::Send
    }

    /// Whether the end has `ctx_close_connection` (a handshake and `"done"`): all but
    /// `ib_write_lat`, which just exits.
    pub fn closes_with_done(self) -> bool {
        self != Self::WRITE_LAT
    }
}

/// Whether a test may run `qps` QPs: 1..=[`MAX_QPS`], and only 1 in a latency test
/// (perftest_parameters.c, `case 'q'`: "Multiple QPs only available on bw tests").
pub fn check_qps(test: Test, qps: usize) -> Result<(), OobError> {
    let reason = if qps == 0 {
        "at least one QP"
    } else if qps > MAX_QPS {
        "at most 16384 QPs (perftest's MAX_QP_NUM)"
    } else if qps > 1 && test.kind == Kind::Latency {
        "several QPs only in bandwidth tests, as perftest"
    } else {
        return Ok(());
    };
    Err(OobError::QpCount { qps, reason })
}

/// The most QPs a test may run (`-q`): perftest_parameters.h's `MAX_QP_NUM`, which `-q`
/// checks with `CHECK_VALUE_IN_RANGE(..., MIN_QP_NUM, MAX_QP_NUM, ...)`.
pub const MAX_QPS: usize = 16384;
