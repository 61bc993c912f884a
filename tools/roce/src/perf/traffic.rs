//! The traffic loops of `roce perf`: what each test posts and polls, and what it records.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use roce_core::{Cqe, Qpn, RecvWr, Remote, SendOp, SendWr, Sge, WcStatus};
use roce_device::{DeviceHandle, RcEndpoint};
use roce_oob::perftest::Verb;

use super::report::Measured;

pub(super) const RECV: u64 = 1;

/// Completions taken from the CQ at a time (perftest's `CTX_POLL_BATCH`).
const POLL_BATCH: usize = 16;

/// What each QP of a bandwidth test completed.
#[derive(Debug, Clone)]
pub(super) struct PerQp {
    /// When every QP had work.
    pub(super) start: Instant,
    /// Iterations each QP has to do.
    pub(super) iters: u32,
    /// Completions per QP.
    pub(super) done: Vec<u32>,
    /// Their sum.
    pub(super) sum: u64,
    /// When the first QP finished, and what each QP had completed by then: the interval in
    /// which every QP had work, over which their goodputs compare.
    pub(super) busy: Option<(Duration, Vec<u32>)>,
}

impl PerQp {
    fn new(qps: usize, iters: u32, start: Instant) -> Self {
        Self {
            start,
            iters,
            done: vec![0; qps],
            sum: 0,
            busy: None,
        }
    }

    fn completed(&mut self, qp: usize) {
        self.done[qp] += 1;
        self.sum += 1;
        if self.done[qp] == self.iters && self.busy.is_none() {
            self.busy = Some((self.start.elapsed(), self.done.clone()));
        }
    }

    /// Iterations of all QPs together.
    fn total(&self) -> u64 {
        u64::from(self.iters) * self.done.len() as u64
    }

    fn finished(&self) -> bool {
        self.sum >= self.total()
    }
}

pub(super) struct Runner<'a> {
    pub(super) device: &'a DeviceHandle,
    /// The QPs, QP 0 first; latency tests have one.
    pub(super) qps: &'a [RcEndpoint],
    /// Each QP's place in `qps`, to attribute the completions of the shared CQ.
    pub(super) index: HashMap<Qpn, usize>,
    /// Each QP's send buffer.
    pub(super) sges: Vec<Sge>,
    /// Each QP's receive buffer.
    pub(super) recv_sges: Vec<Sge>,
    /// Each QP's buffer at the peer.
    pub(super) remotes: Vec<Remote>,
    pub(super) limit: Duration,
    /// Per QP.
    pub(super) iters: u32,
}

impl Runner<'_> {
    /// QP 0, the one of a latency test.
    fn qp(&self) -> &RcEndpoint {
        &self.qps[0]
    }

    fn op(&self, qp: usize, verb: Verb, cas: bool, i: u32) -> SendOp {
        let remote = self.remotes[qp];
        match verb {
            Verb::Write => SendOp::RdmaWrite(remote),
            Verb::Read => SendOp::RdmaRead(remote),
            Verb::Send => SendOp::Send,
            Verb::Atomic if cas => SendOp::CompareSwap {
                remote,
                compare: u64::from(i),
                swap: u64::from(i) + 1,
            },
            Verb::Atomic => SendOp::FetchAdd { remote, add: 1 },
        }
    }

    /// The next completion of the (shared) CQ, which must be a success, and its QP's index.
    async fn complete(&self) -> Result<(Cqe, usize), String> {
        let cqe = self
            .device
            .next_completion_within(self.qp().cq, self.limit)
            .await
            .map_err(|e| e.to_string())?;
        self.check(cqe)
    }

    /// Up to `max` completions, at least one; each must be a success of one of our QPs.
    async fn complete_many(&self, max: usize) -> Result<Vec<(Cqe, usize)>, String> {
        self.device
            .next_completions_within(self.qp().cq, max, self.limit)
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|cqe| self.check(cqe))
            .collect()
    }

    /// A successful completion of one of our QPs, and that QP's index.
    fn check(&self, cqe: Cqe) -> Result<(Cqe, usize), String> {
        if cqe.status != WcStatus::Success {
            return Err(format!(
                "completion with status {:?} on QP {}",
                cqe.status, cqe.qpn
            ));
        }
        let qp = self
            .index
            .get(&cqe.qpn)
            .copied()
            .ok_or_else(|| format!("a completion of QP {}, which is not ours", cqe.qpn))?;
        Ok((cqe, qp))
    }

    /// The WRs that may be posted now: round robin over the QPs, one WR per QP per round, each
    /// QP until it has `depth` in flight or all its iterations posted (`posted` counts them).
    fn fill(
        &self,
        (verb, depth, cas): (Verb, u32, bool),
        posted: &mut [u32],
        done: &[u32],
    ) -> Vec<(Qpn, SendWr)> {
        let mut list = Vec::new();
        loop {
            let before = list.len();
            for qp in 0..self.qps.len() {
                if posted[qp] >= self.iters || posted[qp] - done[qp] >= depth.max(1) {
                    continue;
                }
                let n = posted[qp];
                let wr = SendWr::new(u64::from(n), self.op(qp, verb, cas, n), vec![self.sges[qp]]);
                list.push((self.qps[qp].qpn, wr));
                posted[qp] += 1;
            }
            if list.len() == before {
                return list;
            }
        }
    }

    /// Keeps up to `depth` WRs in flight on every QP until each has completed `iters`, as
    /// perftest's `run_iter_bw` (perftest_resources.c) does: round robin over the QPs, each
    /// while `scnt[index] < iters` and `scnt[index] - ccnt[index] < tx_depth`, until
    /// `iters * num_of_qps` have completed. A post here is a round trip to the device's task
    /// (microseconds, not perftest's nanoseconds), so the WRs that fit are posted as one list
    /// (perftest's `--post_list`) and completions are taken up to 16 at a time (perftest's
    /// `CTX_POLL_BATCH`); the windows are filled one WR per QP per round, so that QP 0 does not
    /// run alone while the others' fill. The per-QP interval starts when every QP has a WR
    /// posted.
    pub(super) async fn bandwidth(
        &self,
        verb: Verb,
        depth: u32,
        cas: bool,
    ) -> Result<Measured, String> {
        let start = Instant::now();
        let n = self.qps.len();
        let wr = (verb, depth, cas);
        let mut posted = vec![0u32; n];
        let mut per_qp = PerQp::new(n, self.iters, start);
        let mut progress = Progress::new(per_qp.total());
        let mut first_round = true;
        while !per_qp.finished() {
            let list = self.fill(wr, &mut posted, &per_qp.done);
            if !list.is_empty() {
                self.device
                    .post_send_list(list)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            if first_round {
                per_qp.start = Instant::now();
                first_round = false;
            }
            for (_, qp) in self.complete_many(POLL_BATCH).await? {
                per_qp.completed(qp);
            }
            progress.tick(per_qp.sum);
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            per_qp: Some(per_qp),
            ..Measured::default()
        })
    }

    /// A send test's server: receives `iters` messages on every QP, reposting receives as they
    /// are used (perftest's `run_iter_bw_server`: while `posted_per_qp[wc_id] < iters`).
    pub(super) async fn receive_all(&self, posted: u32) -> Result<Measured, String> {
        let start = Instant::now();
        let n = self.qps.len();
        let mut outstanding = vec![posted; n];
        let mut per_qp = PerQp::new(n, self.iters, start);
        let mut progress = Progress::new(per_qp.total());
        while !per_qp.finished() {
            let (_, qp) = self.complete().await?;
            per_qp.completed(qp);
            outstanding[qp] -= 1;
            if per_qp.done[qp] + outstanding[qp] < self.iters {
                self.device
                    .post_recv(
                        self.qps[qp].qpn,
                        RecvWr {
                            wr_id: RECV,
                            sgl: vec![self.recv_sges[qp]],
                        },
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                outstanding[qp] += 1;
            }
            progress.tick(per_qp.sum);
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            per_qp: Some(per_qp),
            ..Measured::default()
        })
    }

    /// One READ or atomic at a time; each sample is the round trip.
    pub(super) async fn latency(&self, verb: Verb, cas: bool) -> Result<Measured, String> {
        let start = Instant::now();
        let mut samples = Vec::with_capacity(self.iters as usize);
        for i in 0..self.iters {
            let t = Instant::now();
            let wr = SendWr::new(u64::from(i), self.op(0, verb, cas, i), vec![self.sges[0]]);
            self.device
                .post_send(self.qp().qpn, wr)
                .await
                .map_err(|e| e.to_string())?;
            self.complete().await?;
            samples.push(t.elapsed());
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            samples,
            ..Measured::default()
        })
    }

    /// ib_send_lat: the client sends, the server answers each message; half a round trip per
    /// sample, as perftest reports.
    pub(super) async fn send_latency(&self, client: bool) -> Result<Measured, String> {
        let start = Instant::now();
        let mut samples = Vec::with_capacity(self.iters as usize);
        let send = |i: u32| {
            let mut wr = SendWr::new(u64::from(i) + 2, SendOp::Send, vec![self.sges[0]]);
            wr.inline = self.sges[0].length <= 400;
            self.device.post_send(self.qp().qpn, wr)
        };
        for i in 0..self.iters {
            let t = Instant::now();
            if client {
                send(i).await.map_err(|e| e.to_string())?;
            }
            // Wait for both this side's send and the peer's message.
            let mut waiting = if client { 2 } else { 1 };
            while waiting > 0 {
                let cqe = self
                    .device
                    .next_completion_within(self.qp().cq, self.limit)
                    .await
                    .map_err(|e| e.to_string())?;
                if cqe.status != WcStatus::Success {
                    return Err(format!("completion with status {:?}", cqe.status));
                }
                if cqe.wr_id == RECV {
                    self.device
                        .post_recv(
                            self.qp().qpn,
                            RecvWr {
                                wr_id: RECV,
                                sgl: vec![self.sges[0]],
                            },
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                    if !client {
                        send(i).await.map_err(|e| e.to_string())?;
                        waiting += 1;
                    }
                }
                waiting -= 1;
            }
            samples.push(t.elapsed() / 2);
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            samples,
            ..Measured::default()
        })
    }
}

impl Runner<'_> {
    /// ib_write_lat: each side RDMA-WRITEs its buffer into the peer's, whose last byte carries
    /// the count, and polls its own last byte for the peer's; the server writes first
    /// (perftest's `run_iter_lat_write`: `!(scnt < 1 && machine == SERVER)`). Half a round trip
    /// per sample.
    pub(super) async fn write_latency(
        &self,
        mr: &roce_core::MemoryRegion,
        half: usize,
        server: bool,
    ) -> Result<Measured, String> {
        // We post from the send half; the peer's count arrives in the receive half.
        let last = self.sges[0].length.max(1) as usize - 1;
        let poll = half + last;
        let start = Instant::now();
        let mut samples = Vec::with_capacity(self.iters as usize);
        let (mut scnt, mut rcnt) = (0u32, 0u32);
        let mut round = Instant::now();
        while scnt < self.iters || rcnt < self.iters {
            if rcnt < self.iters && !(scnt < 1 && server) {
                rcnt += 1;
                let deadline = Instant::now() + self.limit;
                while mr.read(poll, 1).is_none_or(|b| b[0] != rcnt as u8) {
                    if Instant::now() > deadline {
                        return Err(format!(
                            "no write from the peer for {:?} (ping {rcnt})",
                            self.limit
                        ));
                    }
                    // The device runs on this thread: let it take the peer's packets in.
                    tokio::task::yield_now().await;
                }
                samples.push(round.elapsed() / 2);
            }
            if scnt < self.iters {
                scnt += 1;
                mr.write(last, &[scnt as u8]);
                round = Instant::now();
                let wr = SendWr::new(
                    u64::from(scnt),
                    SendOp::RdmaWrite(self.remotes[0]),
                    vec![self.sges[0]],
                );
                self.device
                    .post_send(self.qp().qpn, wr)
                    .await
                    .map_err(|e| e.to_string())?;
                self.complete().await?;
            }
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            samples,
            ..Measured::default()
        })
    }
}

/// A line on standard error every 2 s of a run longer than 3 s.
struct Progress {
    start: Instant,
    last: Instant,
    total: u64,
}

impl Progress {
    fn new(total: u64) -> Self {
        let now = Instant::now();
        Self {
            start: now,
            last: now,
            total,
        }
    }

    fn tick(&mut self, done: u64) {
        let now = Instant::now();
        if now - self.start > Duration::from_secs(3) && now - self.last > Duration::from_secs(2) {
            self.last = now;
            eprintln!(
                "roce perf: {done}/{} iterations, {:.0} s",
                self.total,
                (now - self.start).as_secs_f64()
            );
        }
    }
}
