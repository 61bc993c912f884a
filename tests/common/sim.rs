//! Helpers for the two-NIC simulations: work requests on a [`Side`]'s region, and the data a
//! test sends, recognisable by its seed.

use roce_core::{Cqe, Psn, RecvWr, Remote, SendOp, SendWr, Sge, WcOpcode, WcStatus};
pub use roce_sim::pattern;
use roce_sim::{Fault, Pair, Side};

/// An SGE of `len` bytes at `offset` in the side's region.
pub fn sge(side: &Side, offset: u64, len: u32) -> Sge {
    Sge {
        addr: side.mr.addr() + offset,
        length: len,
        lkey: side.mr.lkey(),
    }
}

/// The side's region as a remote target at `offset`.
pub fn remote(side: &Side, offset: u64) -> Remote {
    Remote {
        addr: side.mr.addr() + offset,
        rkey: side.mr.rkey(),
    }
}

/// Posts a signaled send WR on the side's QP.
pub fn post(pair: &mut Pair, a: bool, wr: SendWr) {
    let side = if a { &mut pair.a } else { &mut pair.b };
    side.nic.post_send(side.qpn, wr).expect("a valid send WR");
}

/// Posts [`wr`] on a's QP.
pub fn post_from_a(pair: &mut Pair, wr_id: u64, op: SendOp, offset: u64, len: u32) {
    let wr = wr(&pair.a, wr_id, op, offset, len);
    post(pair, true, wr);
}

/// Posts a receive WR of `len` bytes at `offset`.
pub fn post_recv(side: &mut Side, wr_id: u64, offset: u64, len: u32) {
    let wr = RecvWr {
        wr_id,
        sgl: [sge(side, offset, len)].into(),
    };
    side.nic
        .post_recv(side.qpn, wr)
        .expect("a valid receive WR");
}

/// A send WR of `op` over `len` bytes at `offset` of the side's region.
pub fn wr(side: &Side, wr_id: u64, op: SendOp, offset: u64, len: u32) -> SendWr {
    SendWr::new(wr_id, op, vec![sge(side, offset, len)])
}

/// A FETCH_ADD from `side` of `add` to the 8 bytes at `at` of `peer`'s region; the original
/// value lands at `offset` of the side's.
pub fn fetch_add(side: &Side, wr_id: u64, peer: &Side, at: u64, add: u64, offset: u64) -> SendWr {
    let remote = remote(peer, at);
    wr(side, wr_id, SendOp::FetchAdd { remote, add }, offset, 8)
}

/// A CMP_SWAP from `side`: `swap` into the 8 bytes at `at` of `peer`'s region if they hold
/// `compare`; the original value lands at `offset` of the side's.
pub fn compare_swap(
    side: &Side,
    wr_id: u64,
    peer: &Side,
    at: u64,
    compare: u64,
    swap: u64,
    offset: u64,
) -> SendWr {
    let op = SendOp::CompareSwap {
        remote: remote(peer, at),
        compare,
        swap,
    };
    wr(side, wr_id, op, offset, 8)
}

/// Drives the pair `millis` ms of simulated time on from its current time.
pub fn drive_millis(pair: &mut Pair, millis: u64) {
    let deadline = pair.now + roce_core::Duration::from_millis(millis);
    pair.drive_until(deadline);
}

/// Drops the first packet with PSN `psn`, and lets its retransmission through.
pub fn drop_once(psn: u32) -> Fault {
    Fault::DropPsn {
        psn: Psn::new(psn),
        times: 1,
    }
}

/// The completion, which must be a success of `opcode` for `wr_id`.
pub fn success(cqe: Option<Cqe>, wr_id: u64, opcode: WcOpcode) -> Cqe {
    let cqe = cqe.expect("a completion");
    assert_eq!(
        (cqe.wr_id, cqe.status, cqe.opcode),
        (wr_id, WcStatus::Success, opcode),
        "{cqe:?}"
    );
    cqe
}

/// The bytes of [`post_mixed`]'s SEND, WRITE and READ, to check where they land: the SEND's at
/// b's 300 000, the WRITE's at b's 20 000, the READ's at a's 40 000.
#[derive(Debug, Clone)]
pub struct Mixed {
    pub send_data: Vec<u8>,
    pub write_data: Vec<u8>,
    pub read_data: Vec<u8>,
}

impl Mixed {
    /// After every WR of [`post_mixed`] succeeded: b's two receives completed (the SEND's 6000
    /// bytes, the WRITE's immediate 99), and every byte landed where it goes, the atomics
    /// executed once each (b's counter 12, the originals 0 and 5 at a). `at` names the run.
    pub fn assert_landed(&self, pair: &mut Pair, at: &str) {
        let recvs = pair.b.completions();
        assert_eq!(recvs.len(), 2, "{at}: {recvs:?}");
        assert_eq!((recvs[0].wr_id, recvs[0].byte_len), (50, 6000), "{at}");
        assert_eq!(
            (recvs[1].wr_id, recvs[1].opcode, recvs[1].imm_data),
            (51, WcOpcode::RecvRdmaWithImm, Some(99)),
            "{at}"
        );
        let added = 12u64.to_le_bytes();
        for (mr, offset, want, what) in [
            (&pair.b.mr, 300_000, &self.send_data[..], "SEND"),
            (&pair.b.mr, 20_000, &self.write_data[..], "WRITE"),
            (&pair.a.mr, 40_000, &self.read_data[..], "READ"),
            (&pair.b.mr, 200_000, &added[..], "atomics"),
        ] {
            let got = mr.read(offset, want.len()).expect("inside the region");
            assert_eq!(got, want, "{at}: {what}");
        }
        let word = |offset| {
            let bytes = pair.a.mr.read(offset, 8).expect("inside the region");
            u64::from_le_bytes(bytes.try_into().expect("8 bytes"))
        };
        assert_eq!(
            (word(60_000), word(60_008)),
            (0, 5),
            "{at}: original values"
        );
    }
}

/// A mixed workload from a to b, each WR signaled, the data from `seed`: a SEND of 6000 bytes
/// (into receive 50), a WRITE of 9000, a READ of 7000, two fetch-and-adds on b's 200 000 (5,
/// then 7; originals to a's 60 000 and 60 008), and a WRITE with immediate 99 of 100 bytes
/// (receive 51). Six send WRs (ids 1 to 6), two receives.
pub fn post_mixed(pair: &mut Pair, seed: u64) -> Mixed {
    let (a, b) = (&mut pair.a, &mut pair.b);
    let send_data = pattern(seed, 6000);
    let write_data = pattern(seed + 1, 9000);
    let read_data = pattern(seed + 2, 7000);
    a.mr.write(0, &send_data);
    a.mr.write(10_000, &write_data);
    b.mr.write(100_000, &read_data);
    b.mr.write(200_000, &0u64.to_le_bytes());
    post_recv(b, 50, 300_000, 8000);
    let ops = [
        wr(a, 1, SendOp::Send, 0, 6000),
        wr(a, 2, SendOp::RdmaWrite(remote(b, 20_000)), 10_000, 9000),
        wr(a, 3, SendOp::RdmaRead(remote(b, 100_000)), 40_000, 7000),
        fetch_add(a, 4, b, 200_000, 5, 60_000),
        fetch_add(a, 5, b, 200_000, 7, 60_008),
        wr(
            a,
            6,
            SendOp::RdmaWriteWithImm(remote(b, 30_000), 99),
            10_000,
            100,
        ),
    ];
    post_recv(b, 51, 300_000, 0);
    for op in ops {
        post(pair, true, op);
    }
    Mixed {
        send_data,
        write_data,
        read_data,
    }
}
