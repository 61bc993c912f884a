//! The traffic loops of `roce perf`: what each test posts and polls, and what it records.

mod duplex;
mod error;
pub(super) mod events;
mod moderation;
mod peak;
mod per_qp;
pub(super) mod rows;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use roce_core::{Cqe, MemoryRegion, Qpn, RecvWr, Remote, SendOp, SendWr, Sge, UdDest, WcStatus};
use roce_device::{DeviceError, DeviceHandle, RcEndpoint};
use roce_oob::perftest::Verb;

use super::check::Checker;
use super::report::Measured;

pub(super) const RECV: u64 = 1;

/// Completions taken from the CQ at a time (perftest's `CTX_POLL_BATCH`).
const POLL_BATCH: usize = 16;

/// How long a `-D` send server goes on taking messages after its time is up, once none come.
const DRAIN: Duration = Duration::from_millis(200);

pub(super) use error::TrafficError;
use moderation::Moderation;
pub(super) use peak::best_per_message;
use peak::{PEAK_MAX_ITERS, PEAK_MAX_TOTAL};
pub(super) use per_qp::{PerQp, Plan};

/// When each WR was posted and each completion came, in order (perftest's `tposted` and
/// `tcompleted`), for the peak.
#[derive(Debug, Clone, Default)]
pub(super) struct Times {
    pub(super) posted: Vec<Instant>,
    pub(super) completed: Vec<Instant>,
}

/// What a run has done so far, readable after its future is dropped (Ctrl-C).
#[derive(Debug, Default)]
pub(super) struct Live {
    /// When the traffic started.
    pub(super) started: Option<Instant>,
    /// Iterations completed, all QPs.
    pub(super) completed: u64,
    /// Latency samples.
    pub(super) samples: Vec<Duration>,
}

pub(super) struct Runner<'a> {
    pub(super) device: &'a DeviceHandle,
    /// The QPs, QP 0 first; latency tests have one.
    pub(super) qps: &'a [RcEndpoint],
    /// Each QP's place in `qps`, to attribute the completions of the shared CQ (a tree: no
    /// hashing of every completion's QPN).
    pub(super) index: BTreeMap<Qpn, usize>,
    /// Each QP's send buffer.
    pub(super) sges: Vec<Sge>,
    /// Each QP's receive buffer.
    pub(super) recv_sges: Vec<Sge>,
    /// Each QP's buffer at the peer.
    pub(super) remotes: Vec<Remote>,
    pub(super) limit: Duration,
    pub(super) plan: Plan,
    /// Progress, for an interrupted run.
    pub(super) live: &'a RefCell<Live>,
    /// With `--check`, the buffer and what checks each message that lands here.
    pub(super) check: Option<(&'a MemoryRegion, &'a RefCell<Checker>)>,
    /// With `-e`, the CQ's completion channel: completions are waited for by its events.
    pub(super) events: Option<&'a events::Channel>,
    /// With `--run_infinitely`, where the rows go (instead of the progress lines).
    pub(super) rows: Option<&'a RefCell<rows::Rows>>,
    /// With `-c UD`, each QP's destination.
    pub(super) ud: Option<&'a [UdDest]>,
}

impl Runner<'_> {
    /// QP 0, the one of a latency test.
    fn qp(&self) -> &RcEndpoint {
        &self.qps[0]
    }

    fn op(&self, qp: usize, verb: Verb, cas: bool, i: u64) -> SendOp {
        let remote = self.remotes[qp];
        match verb {
            Verb::Write => SendOp::RdmaWrite(remote),
            Verb::Read => SendOp::RdmaRead(remote),
            Verb::Send => SendOp::Send,
            Verb::Atomic if cas => SendOp::CompareSwap {
                remote,
                compare: i,
                swap: i + 1,
            },
            Verb::Atomic => SendOp::FetchAdd { remote, add: 1 },
        }
    }

    /// A work request of QP `qp` from `sge`: with `-c UD`, to the peer's QP.
    fn wr(&self, qp: usize, wr_id: u64, op: SendOp, sge: Sge) -> SendWr {
        let mut wr = SendWr::new(wr_id, op, sge);
        wr.ud = self.ud.map(|ud| ud[qp]);
        wr
    }

    /// Posts QP `qp`'s receive buffer again.
    async fn repost_recv(&self, qp: usize) -> Result<(), TrafficError> {
        let wr = RecvWr {
            wr_id: RECV,
            sgl: [self.recv_sges[qp]].into(),
        };
        self.device.post_recv(self.qps[qp].qpn, wr).await?;
        Ok(())
    }

    async fn complete(&self) -> Result<(Cqe, usize), TrafficError> {
        self.complete_within(self.limit)
            .await?
            .ok_or_else(|| self.silence())
    }

    /// The next completion within `limit`, `None` if none came.
    async fn complete_within(&self, limit: Duration) -> Result<Option<(Cqe, usize)>, TrafficError> {
        match self.cqe(limit).await {
            Ok(cqe) => self.check(cqe).map(Some),
            Err(DeviceError::Timeout(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The next completion of the (shared) CQ within `limit`: polled for without a list (the
    /// latency loops take one at a time), or with `-e` waited for by the CQ's events.
    async fn cqe(&self, limit: Duration) -> Result<Cqe, DeviceError> {
        match self.events {
            Some(channel) => channel.next_one(limit).await,
            None => {
                self.device
                    .next_completion_within(self.qp().cq, limit)
                    .await
            }
        }
    }

    /// Appends up to `max` completions of the (shared) CQ to `out`, at least one, within
    /// `limit`, and returns how many: polled for, or with `-e` waited for by the CQ's events.
    async fn cqes(
        &self,
        max: usize,
        limit: Duration,
        out: &mut Vec<Cqe>,
    ) -> Result<usize, DeviceError> {
        match self.events {
            Some(channel) => channel.next(max, limit, out).await,
            None => {
                self.device
                    .next_completions_into(self.qp().cq, max, limit, out)
                    .await
            }
        }
    }

    /// Why a run stopped when nothing completed for the timeout.
    fn silence(&self) -> TrafficError {
        TrafficError::Silence {
            secs: self.limit.as_secs(),
            completed: self.live.borrow().completed,
        }
    }

    /// Marks the start of the traffic; returns it.
    fn started(&self) -> Instant {
        let now = Instant::now();
        let mut live = self.live.borrow_mut();
        live.started = Some(now);
        live.completed = 0;
        live.samples.clear();
        now
    }

    /// When a `-D` run stops posting.
    fn end(&self, start: Instant) -> Option<Instant> {
        match self.plan {
            Plan::Iterations(_) => None,
            Plan::Duration { total, .. } => Some(start + total),
        }
    }

    /// `sum` completions so far: a row of `--run_infinitely` when one is due, else the
    /// progress line when one is due; the count for Ctrl-C either way.
    fn progress(&self, progress: &mut Progress, sum: u64) {
        match self.rows {
            Some(rows) => rows.borrow_mut().tick(sum, Instant::now(), self.live),
            None => {
                self.live.borrow_mut().completed = sum;
                progress.tick(sum);
            }
        }
    }

    /// One latency sample.
    fn sample(&self, sample: Duration) {
        let mut live = self.live.borrow_mut();
        live.samples.push(sample);
        live.completed += 1;
    }

    /// The samples of the run.
    fn samples(&self) -> Vec<Duration> {
        std::mem::take(&mut self.live.borrow_mut().samples)
    }

    /// Up to `max` completions into `out` (emptied first), at least one. Each must be a
    /// success of one of our QPs: the caller checks each with [`Runner::check`] as it uses it.
    async fn complete_many(&self, max: usize, out: &mut Vec<Cqe>) -> Result<(), TrafficError> {
        out.clear();
        self.cqes(max, self.limit, out).await.map_err(|e| match e {
            DeviceError::Timeout(_) => self.silence(),
            e => e.into(),
        })?;
        Ok(())
    }

    /// With `--check`, that message `message` of QP `qp`, which landed at `sge`, is what the
    /// peer sent.
    fn check_landed(&self, sge: Sge, qp: usize, message: u64) -> Result<(), TrafficError> {
        match self.check {
            Some((mr, checker)) => Ok(checker.borrow_mut().check(mr, sge, qp, message)?),
            None => Ok(()),
        }
    }

    /// A successful completion of one of our QPs, and that QP's index.
    fn check(&self, cqe: Cqe) -> Result<(Cqe, usize), TrafficError> {
        if cqe.status != WcStatus::Success {
            return Err(TrafficError::Status {
                status: cqe.status,
                qpn: cqe.qpn,
            });
        }
        let qp = self
            .index
            .get(&cqe.qpn)
            .copied()
            .ok_or(TrafficError::NotOurs(cqe.qpn))?;
        Ok((cqe, qp))
    }

    /// Posts the WRs that may be posted now as one WR list (`ibv_post_send` with a list,
    /// perftest's `--post_list`): round robin over the QPs, one WR per QP per round, each QP
    /// until it has `depth` in flight or all its iterations posted (`posted` counts them).
    /// Their posting time is kept in `times` (for the peak) when kept. Each WR is built where
    /// the engine takes it, inside the one verb, rather than gathered into a list first: a WR
    /// is some 140 bytes, and copying one just built cost more than building it.
    /// WR `n` of a QP has id `n` and asks for a completion as `moderation` says.
    fn fill_and_post(
        &self,
        (verb, depth, cas, moderation): (Verb, u32, bool, Moderation),
        posted: &mut [u64],
        done: &[u64],
        times: &mut Option<Times>,
    ) -> Result<(), TrafficError> {
        let now = Instant::now();
        let mut count = 0;
        let post = |nic: &mut roce_core::Nic, _| -> Result<(), roce_core::VerbsError> {
            loop {
                let before = count;
                for qp in 0..self.qps.len() {
                    if posted[qp] >= self.plan.iters()
                        || posted[qp] - done[qp] >= u64::from(depth.max(1))
                    {
                        continue;
                    }
                    let n = posted[qp];
                    let mut wr = self.wr(qp, n, self.op(qp, verb, cas, n), self.sges[qp]);
                    wr.signaled = moderation.signaled(n);
                    nic.post_send(self.qps[qp].qpn, wr)?;
                    posted[qp] += 1;
                    count += 1;
                }
                if count == before {
                    return Ok(());
                }
            }
        };
        self.device
            .verb(roce_device::Verb::PostSend, post)?
            .map_err(DeviceError::from)?;
        if let Some(times) = times {
            times.posted.extend(std::iter::repeat_n(now, count));
        }
        Ok(())
    }

    /// Keeps up to `depth` WRs in flight on every QP until each has completed `iters`, as
    /// perftest's `run_iter_bw` (perftest_resources.c) does: round robin over the QPs, each
    /// while `scnt[index] < iters` and `scnt[index] - ccnt[index] < tx_depth`, until
    /// `iters * num_of_qps` have completed. A post here takes the engine's lock and may send
    /// (microseconds, not perftest's nanoseconds), so the WRs that fit are posted as one list
    /// (perftest's `--post_list`) and completions are taken up to 16 at a time (perftest's
    /// `CTX_POLL_BATCH`); the windows are filled one WR per QP per round, so that QP 0 does not
    /// run alone while the others' fill. The per-QP interval starts when every QP has a WR
    /// posted.
    pub(super) async fn bandwidth(
        &self,
        verb: Verb,
        (depth, cq_mod): (u32, u32),
        cas: bool,
    ) -> Result<Measured, TrafficError> {
        let start = self.started();
        let n = self.qps.len();
        let iters = self.plan.iters();
        let moderation = Moderation::new(cq_mod, depth, iters);
        let wr = (verb, depth, cas, moderation);
        let total = iters.saturating_mul(n as u64);
        let end = self.end(start);
        let mut posted = vec![0u64; n];
        let mut per_qp = PerQp::new(n, start, self.plan);
        let mut progress = Progress::new(end.is_none().then_some(total));
        let mut times = (matches!(self.plan, Plan::Iterations(n) if n <= PEAK_MAX_ITERS)
            && total <= PEAK_MAX_TOTAL)
            .then(Times::default);
        let mut first_round = true;
        // Reused from round to round, as perftest's array of `ibv_wc`.
        let mut cqes = Vec::with_capacity(POLL_BATCH);
        loop {
            let posting = end.is_none_or(|end| Instant::now() < end);
            // Once a timed run stops posting, the WRs after each QP's last that asked complete
            // unseen, as in perftest: the run ends when the ones that asked have come (counted
            // only then: a pass over every QP).
            if per_qp.sum >= total || (!posting && moderation.asked_of_all(&posted) == per_qp.sum) {
                break;
            }
            if posting {
                self.fill_and_post(wr, &mut posted, &per_qp.done, &mut times)?;
            }
            if first_round {
                per_qp.start = Instant::now();
                first_round = false;
            }
            self.complete_many(POLL_BATCH, &mut cqes).await?;
            let now = Instant::now();
            for &cqe in &cqes {
                let (cqe, qp) = self.check(cqe)?;
                if verb == Verb::Read {
                    self.check_landed(self.sges[qp], qp, cqe.wr_id)?;
                }
                // The WR's id is its index in its QP: it and the unsignaled ones before it
                // are done.
                let added = per_qp.completed_through(qp, cqe.wr_id + 1, now);
                if let Some(times) = &mut times {
                    times
                        .completed
                        .extend(std::iter::repeat_n(now, added as usize));
                }
            }
            self.progress(&mut progress, per_qp.sum);
        }
        Ok(Measured {
            best_per_message: times
                .and_then(|t| best_per_message(&t.posted, &t.completed, moderation.every())),
            ..measured(start, per_qp)
        })
    }

    /// A send test's server: receives `iters` messages on every QP, reposting receives as they
    /// are used (perftest's `run_iter_bw_server`: while `posted_per_qp[wc_id] < iters`). With
    /// `-D`, until its own time is up; then it goes on taking (and reposting for) what the
    /// client still sends until nothing comes for [`DRAIN`].
    pub(super) async fn receive_all(&self, posted: u32) -> Result<Measured, TrafficError> {
        let start = self.started();
        let n = self.qps.len();
        let iters = self.plan.iters();
        let total = iters.saturating_mul(n as u64);
        let end = self.end(start);
        let mut outstanding = vec![u64::from(posted); n];
        let mut per_qp = PerQp::new(n, start, self.plan);
        let mut progress = Progress::new(end.is_none().then_some(total));
        while per_qp.sum < total {
            let now = Instant::now();
            let over = end.is_some_and(|end| now >= end);
            // Before its own end, a -D server waits no later than that end: the client, whose
            // time started first, may have stopped sending already, and silence then is the
            // end of the test, not a stalled peer.
            let wait = match end {
                _ if over => DRAIN,
                Some(end) => self.limit.min(end - now),
                None => self.limit,
            };
            let Some((_, qp)) = self.complete_within(wait).await? else {
                if over {
                    // Nothing more for DRAIN after the end: the client is done.
                    break;
                }
                if end.is_some_and(|end| Instant::now() >= end) {
                    // The end came while waiting: drain what the client still sends.
                    continue;
                }
                return Err(self.silence());
            };
            self.check_landed(self.recv_sges[qp], qp, per_qp.done[qp])?;
            per_qp.completed(qp, Instant::now());
            outstanding[qp] -= 1;
            if per_qp.done[qp] + outstanding[qp] < iters {
                self.repost_recv(qp).await?;
                outstanding[qp] += 1;
            }
            self.progress(&mut progress, per_qp.sum);
        }
        Ok(measured(start, per_qp))
    }

    /// One READ or atomic at a time; each sample is the round trip.
    pub(super) async fn latency(&self, verb: Verb, cas: bool) -> Result<Measured, TrafficError> {
        let start = self.started();
        let iters = self.plan.iters();
        // One clock read per round trip: its end is the next one's start.
        let mut t = Instant::now();
        for i in 0..iters {
            let wr = SendWr::new(i, self.op(0, verb, cas, i), self.sges[0]);
            self.device.post_send(self.qp().qpn, wr).await?;
            self.complete().await?;
            let end = Instant::now();
            self.sample(end - t);
            t = end;
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            samples: self.samples(),
            ..Measured::default()
        })
    }

    /// ib_send_lat: the client sends, the server answers each message; half a round trip per
    /// sample, as perftest reports.
    pub(super) async fn send_latency(&self, client: bool) -> Result<Measured, TrafficError> {
        let start = self.started();
        let iters = self.plan.iters();
        let send = |i: u64| {
            let mut wr = self.wr(0, i + 2, SendOp::Send, self.sges[0]);
            wr.inline = self.sges[0].length <= 400;
            self.device.post_send(self.qp().qpn, wr)
        };
        // One clock read per exchange: its end is the next one's start (the read sits between
        // a completion and the next post, on the path the figure measures).
        let mut t = Instant::now();
        for i in 0..iters {
            if client {
                send(i).await?;
            }
            // Wait for both this side's send and the peer's message.
            let mut waiting = if client { 2 } else { 1 };
            while waiting > 0 {
                let cqe = self.cqe(self.limit).await?;
                if cqe.status != WcStatus::Success {
                    return Err(TrafficError::LatencyStatus(cqe.status));
                }
                if cqe.wr_id == RECV {
                    self.repost_recv(0).await?;
                    if !client {
                        send(i).await?;
                        waiting += 1;
                    }
                }
                waiting -= 1;
            }
            let end = Instant::now();
            self.sample((end - t) / 2);
            t = end;
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            samples: self.samples(),
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
        mr: &MemoryRegion,
        half: usize,
        server: bool,
    ) -> Result<Measured, TrafficError> {
        // We post from the send half; the peer's count arrives in the receive half.
        let last = self.sges[0].length.max(1) as usize - 1;
        let poll = half + last;
        let start = self.started();
        // A latency test counts -n iterations (no -D): at most u32::MAX.
        let iters = u32::try_from(self.plan.iters()).unwrap_or(u32::MAX);
        let (mut scnt, mut rcnt) = (0u32, 0u32);
        let mut round = Instant::now();
        while scnt < iters || rcnt < iters {
            if rcnt < iters && !(scnt < 1 && server) {
                rcnt += 1;
                let deadline = Instant::now() + self.limit;
                while mr.read(poll, 1).is_none_or(|b| b[0] != rcnt as u8) {
                    if Instant::now() > deadline {
                        return Err(TrafficError::NoWrite {
                            limit: self.limit,
                            ping: rcnt,
                        });
                    }
                    // The device runs on this thread: let it take the peer's packets in.
                    tokio::task::yield_now().await;
                }
                self.sample(round.elapsed() / 2);
            }
            if scnt < iters {
                scnt += 1;
                mr.write(last, &[scnt as u8]);
                round = Instant::now();
                let wr = SendWr::new(
                    u64::from(scnt),
                    SendOp::RdmaWrite(self.remotes[0]),
                    self.sges[0],
                );
                self.device.post_send(self.qp().qpn, wr).await?;
                self.complete().await?;
            }
        }
        Ok(Measured {
            elapsed: start.elapsed(),
            samples: self.samples(),
            ..Measured::default()
        })
    }
}

/// A line on standard error every 2 s of a run longer than 3 s.
struct Progress {
    start: Instant,
    last: Instant,
    /// `None` with `-D`.
    total: Option<u64>,
}

impl Progress {
    fn new(total: Option<u64>) -> Self {
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
            let of = self.total.map_or_else(String::new, |t| format!("/{t}"));
            eprintln!(
                "roce perf: {done}{of} iterations, {:.0} s",
                (now - self.start).as_secs_f64()
            );
        }
    }
}

/// What a bandwidth loop measured: the per-QP interval where every QP was busy (or the whole
/// run when there is none), and the per-QP counts.
fn measured(start: Instant, per_qp: PerQp) -> Measured {
    let (elapsed, iterations) = per_qp.sampled().unwrap_or((start.elapsed(), per_qp.sum));
    Measured {
        elapsed,
        iterations,
        per_qp: Some(per_qp),
        ..Measured::default()
    }
}

#[cfg(test)]
mod tests;
