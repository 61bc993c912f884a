//! `-b` of a send test: both sides send and receive at once on every QP (perftest's
//! `run_iter_bi`, perftest_resources.c).

use std::time::Instant;

use roce_core::WcOpcode;
use roce_oob::perftest::Verb;

use super::error::TrafficError;
use super::moderation::Moderation;
use super::peak::{PEAK_MAX_ITERS, PEAK_MAX_TOTAL};
use super::{DRAIN, POLL_BATCH, PerQp, Plan, Progress, Runner, Times, best_per_message, measured};
use crate::perf::report::Measured;

impl Runner<'_> {
    /// Sends `iters` messages on every QP with up to `depth` in flight while taking the peer's,
    /// `posted` receives per QP waiting, reposted as they are used; done when every QP has
    /// both sent and received its `iters` (with `-D`: once its time is up, its sends are
    /// complete and nothing more came for [`DRAIN`]). The server sends nothing before its
    /// first receive, so that it does not start before the client (`run_iter_bi`:
    /// `before_first_rx`). What is measured is this side's sends, as perftest's report.
    pub(in crate::perf) async fn bidirectional(
        &self,
        (depth, cq_mod): (u32, u32),
        posted: u32,
        client: bool,
    ) -> Result<Measured, TrafficError> {
        let start = self.started();
        let n = self.qps.len();
        let iters = self.plan.iters();
        let moderation = Moderation::new(cq_mod, depth, iters);
        let total = iters.saturating_mul(n as u64);
        let end = self.end(start);
        let mut sent = vec![0u64; n];
        let mut received = vec![0u64; n];
        let mut outstanding = vec![u64::from(posted); n];
        let mut received_sum = 0u64;
        let mut per_qp = PerQp::new(n, start, self.plan);
        let mut progress = Progress::new(end.is_none().then_some(total));
        let mut times = (matches!(self.plan, Plan::Iterations(n) if n <= PEAK_MAX_ITERS)
            && total <= PEAK_MAX_TOTAL)
            .then(Times::default);
        let mut sending = client;
        let mut first_round = true;
        let mut batch = Vec::with_capacity(POLL_BATCH);
        loop {
            let now = Instant::now();
            let posting = end.is_none_or(|end| now < end);
            let over = match end {
                None => per_qp.sum >= total && received_sum >= total,
                // The sends up to each QP's last that asked have completed (`bandwidth`).
                Some(_) => !posting && moderation.asked_of_all(&sent) == per_qp.sum,
            };
            if over {
                break;
            }
            if sending && posting {
                self.fill_and_post(
                    (Verb::Send, depth, false, moderation),
                    &mut sent,
                    &per_qp.done,
                    &mut times,
                )?;
                if first_round {
                    per_qp.start = Instant::now();
                    first_round = false;
                }
            }
            // Before its own end a -D side waits no later than that end: silence then is the
            // peer's time being up, not a stalled peer.
            let wait = match end {
                Some(end) if posting => self.limit.min(end.saturating_duration_since(now)),
                _ => self.limit,
            };
            batch.clear();
            match self.cqes(POLL_BATCH, wait, &mut batch).await {
                Ok(_) => {}
                // The wait ended at this side's end, not at the timeout.
                Err(roce_device::DeviceError::Timeout(_)) if wait < self.limit => continue,
                Err(roce_device::DeviceError::Timeout(_)) => return Err(self.silence()),
                Err(e) => return Err(e.into()),
            };
            let now = Instant::now();
            for &cqe in &batch {
                let (cqe, qp) = self.check(cqe)?;
                if matches!(cqe.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm) {
                    self.check_landed(self.recv_sges[qp], qp, received[qp])?;
                    received[qp] += 1;
                    received_sum += 1;
                    outstanding[qp] -= 1;
                    sending = true;
                    if received[qp] + outstanding[qp] < iters {
                        self.repost_recv(qp).await?;
                        outstanding[qp] += 1;
                    }
                } else {
                    // A send's id is its index in its QP (`fill_and_post`).
                    let added = per_qp.completed_through(qp, cqe.wr_id + 1, now);
                    if let Some(times) = &mut times {
                        times
                            .completed
                            .extend(std::iter::repeat_n(now, added as usize));
                    }
                }
            }
            self.progress(&mut progress, per_qp.sum);
        }
        // -D: the peer's last messages, until nothing comes for DRAIN.
        if end.is_some() {
            while let Some((cqe, qp)) = self.complete_within(DRAIN).await? {
                if matches!(cqe.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm) {
                    self.repost_recv(qp).await?;
                }
            }
        }
        Ok(Measured {
            best_per_message: times
                .and_then(|t| best_per_message(&t.posted, &t.completed, moderation.every())),
            ..measured(start, per_qp)
        })
    }
}
