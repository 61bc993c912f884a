//! What `roce perf` measured, and how it prints it: perftest's tables, or JSON.

use std::time::Duration;

use roce_core::Qpn;
use roce_device::DeviceHandle;
use roce_oob::perftest::{BwReport, Kind, Test};
use roce_sim::scenario::jain_index;
use serde_json::{Value, json};

use super::Args;
use super::traffic::PerQp;
use roce_device::Cc;

/// The unit of perftest's table and of the report it sends the peer: MB/sec as perftest
/// 4.5-0.17 counts them, 2^20 bytes per second, or Gb/sec with `--report_gbits`
/// (`print_report_bw`: `format_factor = (report_fmt == MBS) ? 0x100000 : 125000000`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    /// 2^20 bytes per second.
    MiB,
    /// 10^9 bits per second.
    Gbit,
}

impl Unit {
    /// Bytes per second in one unit.
    fn factor(self) -> f64 {
        match self {
            Self::MiB => 1_048_576.0,
            Self::Gbit => 125_000_000.0,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::MiB => "MB/sec",
            Self::Gbit => "Gb/sec",
        }
    }
}

/// What a run measured.
#[derive(Debug, Default, Clone)]
pub(super) struct Measured {
    /// The interval the figures are over: the run, or with `-D` its sampling window.
    pub(super) elapsed: Duration,
    /// Iterations completed in `elapsed`, all QPs together (bandwidth tests).
    pub(super) iterations: u64,
    /// One-way latencies, for latency tests.
    pub(super) samples: Vec<Duration>,
    /// From the peer's report only (the server of a one-way test shows the client's).
    pub(super) reported: Option<BwReport>,
    /// Bandwidth tests that see completions: what each QP did.
    pub(super) per_qp: Option<PerQp>,
    /// The best time per message of any window, seconds: the peak
    /// ([`super::traffic::best_per_message`]).
    pub(super) best_per_message: Option<f64>,
    /// With `-e`: the completion events taken so far.
    pub(super) cq_events: Option<u64>,
    /// With `-b`: the peer's report of its direction, added to this side's in the result.
    pub(super) remote: Option<BwReport>,
}

/// A bandwidth result: bytes per second (peak, average), messages per second; `None` where
/// this side measured nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Figures {
    peak: Option<f64>,
    avg: Option<f64>,
    rate: Option<f64>,
    iterations: u64,
}

impl Measured {
    pub(super) fn from_report(report: &BwReport) -> Self {
        Self {
            reported: Some(*report),
            ..Self::default()
        }
    }

    /// Bytes and messages per second. A peer's report is taken to be in `unit` (perftest
    /// sends no unit; both sides are expected to be given the same `--report_gbits`); its
    /// peak of 0 is perftest's "not measured".
    fn figures(&self, size: u32, unit: Unit) -> Figures {
        if let Some(r) = self.reported {
            return Figures {
                peak: (r.bw_peak > 0.0).then(|| r.bw_peak * unit.factor()),
                avg: Some(r.bw_avg * unit.factor()),
                rate: Some(r.msg_rate_avg * 1e6),
                iterations: r.iters,
            };
        }
        let secs = self.elapsed.as_secs_f64();
        if self.iterations == 0 || secs <= 0.0 {
            return Figures {
                peak: None,
                avg: None,
                rate: None,
                iterations: self.iterations,
            };
        }
        let n = self.iterations as f64;
        Figures {
            peak: self.best_per_message.map(|t| f64::from(size) / t),
            avg: Some(f64::from(size) * n / secs),
            rate: Some(n / secs),
            iterations: self.iterations,
        }
    }

    /// What the result shows: this side's figures, plus with `-b` the peer's direction (its
    /// peak, average and rate added to ours; the iterations are ours), as perftest's
    /// `print_full_bw_report(my_bw_rep, rem_bw_rep)`.
    fn shown(&self, size: u32, unit: Unit) -> Figures {
        let mine = self.figures(size, unit);
        let Some(remote) = &self.remote else {
            return mine;
        };
        let theirs = Self::from_report(remote).figures(size, unit);
        let add = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        Figures {
            peak: add(mine.peak, theirs.peak),
            avg: add(mine.avg, theirs.avg),
            rate: add(mine.rate, theirs.rate),
            iterations: mine.iterations,
        }
    }

    /// The report for the peer, in `unit` (0 for what was not measured, as perftest sends).
    pub(super) fn report(&self, size: u32, unit: Unit) -> BwReport {
        let f = self.figures(size, unit);
        BwReport {
            size: u64::from(size),
            iters: f.iterations,
            bw_peak: f.peak.unwrap_or(0.0) / unit.factor(),
            bw_avg: f.avg.unwrap_or(0.0) / unit.factor(),
            msg_rate_avg: f.rate.unwrap_or(0.0) / 1e6,
        }
    }

    /// Each QP's goodput in MB/s (10^6 bytes) over its own transfer: its bytes from the start
    /// (every QP had work) to its last completion; `None` for a QP that completed nothing.
    /// Then Jain's fairness index of them, `None` unless every QP has a goodput. `None`
    /// without per-QP completions (the server of a one-way test).
    fn fairness(&self, size: u32) -> Option<(Vec<Option<f64>>, Option<f64>)> {
        let per_qp = self.per_qp.as_ref()?;
        let rates: Vec<Option<f64>> = per_qp
            .done
            .iter()
            .zip(per_qp.last())
            .map(|(&n, last)| {
                let secs = last.map_or(0.0, |d| d.as_secs_f64());
                (secs > 0.0).then(|| f64::from(size) * n as f64 / secs / 1e6)
            })
            .collect();
        let all: Option<Vec<f64>> = rates.iter().copied().collect();
        // (Rounding can put equal shares a hair above 1.)
        Some((rates, all.map(|r| jain_index(&r).min(1.0))))
    }
}

/// Which part of a table a call prints (`-a` prints one row per size between one header and
/// one footer).
#[derive(Debug, Clone, Copy)]
pub(super) struct Part {
    pub(super) header: bool,
    pub(super) footer: bool,
    /// Ctrl-C stopped the run: the figures are of what completed until then.
    pub(super) interrupted: bool,
}

/// Bytes per second as MB/s of 10^6 bytes, the unit of `--json`.
fn mb_per_s(bytes_per_s: Option<f64>) -> Value {
    json!(bytes_per_s.map(|b| b / 1e6))
}

pub(super) async fn print_result(
    args: &Args,
    test: Test,
    size: u32,
    m: &Measured,
    device: &DeviceHandle,
    qpn: Qpn,
    part: Part,
) -> anyhow::Result<()> {
    let stats = device.stats().await?;
    let backend = device.backend_stats();
    let cc = device.qp_congestion(qpn).await?;
    // The QP's congestion control, in the JSON result and (when on) in a line of text.
    let congestion = json!({
        "algorithm": args.device.cc.name(),
        "params": args.device.cc_params.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        "rate_bps": cc.rate_bps, "target_bps": cc.target_bps, "alpha": cc.alpha,
        "window_bytes": cc.window_bytes,
        "cnps_sent": cc.cnps_sent, "cnps_received": cc.cnps_received,
        "rate_decreases": stats.rate_decreases, "rate_increases": stats.rate_increases,
    });
    let unit = args.unit();
    let line = "-".repeat(87);
    let mut value = if test.kind == Kind::Bandwidth {
        let f = m.shown(size, unit);
        let fairness = m.fairness(size);
        if !args.json {
            let num = |x: Option<f64>, k: f64| x.map_or(0.0, |x| x / k);
            if part.header {
                println!("{line}");
                println!(
                    " #bytes     #iterations    BW peak[{0}]    BW average[{0}]   MsgRate[Mpps]",
                    unit.name()
                );
            }
            println!(
                " {size:<10} {:<10}       {:<10.2}         {:<10.2}           {:.6}",
                f.iterations,
                num(f.peak, unit.factor()),
                num(f.avg, unit.factor()),
                num(f.rate, 1e6)
            );
            if part.footer {
                println!("{line}");
            }
            if let Some((rates, jain)) = fairness.as_ref().filter(|_| args.qps > 1) {
                let known: Vec<f64> = rates.iter().flatten().copied().collect();
                let (min, max) = known.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &r| {
                    (lo.min(r), hi.max(r))
                });
                let jain = jain.map_or_else(
                    || "- (a QP completed nothing)".to_owned(),
                    |j| format!("{j:.4}"),
                );
                println!(
                    " {} QPs, each over its whole transfer: per-QP BW [{}] min {:.2}, max {:.2}; Jain's fairness index {jain}",
                    args.qps,
                    unit.name(),
                    if known.is_empty() {
                        0.0
                    } else {
                        min * 1e6 / unit.factor()
                    },
                    max * 1e6 / unit.factor()
                );
            }
        }
        let per_qp_bytes = m.per_qp.as_ref().map(|p| {
            p.done
                .iter()
                .map(|&n| n * u64::from(size))
                .collect::<Vec<_>>()
        });
        let mut value = json!({
            "test": format!("{:?}_bw", test.verb).to_lowercase(), "bytes": size,
            "iterations": f.iterations, "seconds": (m.reported.is_none()).then_some(m.elapsed.as_secs_f64()),
            "duration_s": args.duration,
            "bw_peak_mb_s": mb_per_s(f.peak), "bw_avg_mb_s": mb_per_s(f.avg),
            "msg_rate_mpps": f.rate.map(|r| r / 1e6),
            "qps": args.qps, "per_qp_bytes": per_qp_bytes,
            "per_qp_mb_s": fairness.as_ref().map(|f| &f.0), "jain": fairness.as_ref().map(|f| f.1),
        });
        if args.bidirectional {
            value["local_bw_avg_mb_s"] = mb_per_s(m.figures(size, unit).avg);
            value["remote_bw_avg_mb_s"] = mb_per_s(
                m.remote
                    .as_ref()
                    .and_then(|r| Measured::from_report(r).figures(size, unit).avg),
            );
        }
        value
    } else {
        let mut us: Vec<f64> = m.samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        us.sort_by(f64::total_cmp);
        let pick = |q: f64| {
            us.get(((us.len() as f64 * q) as usize).min(us.len().saturating_sub(1)))
                .copied()
        };
        let n = us.len() as f64;
        let avg = (!us.is_empty()).then(|| us.iter().sum::<f64>() / n);
        let stdev = avg.map(|avg| (us.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / n).sqrt());
        let (min, max, typical) = (pick(0.0), pick(1.0), pick(0.5));
        if args.json {
            // Printed below, with the counters.
        } else if us.is_empty() {
            println!("{line}\n (the client measures this test)\n{line}");
        } else {
            let v = |x: Option<f64>| x.unwrap_or(0.0);
            println!("{line}");
            println!(
                " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
            );
            println!(
                " {size:<6} {:<10}     {:<10.2}     {:<10.2}   {:<10.2}       {:<10.2}     {:<10.2}      {:<10.2}             {:<10.2}",
                us.len(),
                v(min),
                v(max),
                v(typical),
                v(avg),
                v(stdev),
                v(pick(0.99)),
                v(pick(0.999))
            );
            println!("{line}");
        }
        // A side that measured nothing (the server of a READ or atomic test) says null.
        json!({
            "test": format!("{:?}_lat", test.verb).to_lowercase(), "bytes": size,
            "iterations": us.len(),
            "t_min_us": min, "t_max_us": max, "t_typical_us": typical, "t_avg_us": avg, "t_stdev_us": stdev,
            "p99_us": pick(0.99), "p999_us": pick(0.999),
        })
    };
    if !args.json && part.footer {
        if args.device.cc != Cc::None {
            let mbps = |r: Option<u64>| {
                r.map_or_else(|| "-".to_owned(), |r| format!("{:.1}", r as f64 / 1e6))
            };
            println!(
                " congestion: rate {} Mb/s, target {} Mb/s, alpha {:.3}, CNPs sent {}, received {}, rate decreases {}",
                mbps(cc.rate_bps),
                mbps(cc.target_bps),
                cc.alpha,
                cc.cnps_sent,
                cc.cnps_received,
                stats.rate_decreases
            );
        }
        if args.stats {
            print!("{}", crate::json::stats_text(&stats, &backend));
        }
    }
    if args.json {
        value["interrupted"] = json!(part.interrupted);
        value["cq_events"] = json!(m.cq_events);
        // What the poster took: one per -Q WRs of each QP and its last (null where this side
        // polls none: a one-way test's server).
        value["completions"] = json!(m.per_qp.as_ref().map(|p| p.completions));
        value["congestion"] = congestion;
        crate::json::add_counters(&mut value, &stats, &backend);
        println!("{value}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_and_the_table_count_megabytes_as_perftest_does() {
        // 2^20 bytes a second for one second: perftest's 1 MB/sec; 1.048576 MB/s in --json.
        let measured = Measured {
            elapsed: Duration::from_secs(1),
            iterations: 1,
            best_per_message: Some(0.5),
            ..Measured::default()
        };
        let report = measured.report(1 << 20, Unit::MiB);
        assert_eq!(
            (report.bw_peak, report.bw_avg, report.msg_rate_avg),
            (2.0, 1.0, 1e-6)
        );
        let f = measured.figures(1 << 20, Unit::MiB);
        assert_eq!(mb_per_s(f.avg), json!(1.048_576));
        // --report_gbits: 2^20 bytes a second are 0.008388608 Gb/sec.
        let gbits = measured.report(1 << 20, Unit::Gbit);
        assert!((gbits.bw_avg - 0.008_388_608).abs() < 1e-12, "{gbits:?}");
        // A peer's report is shown in its own units.
        let shown = Measured::from_report(&report).figures(0, Unit::MiB);
        assert_eq!(shown, f);
        // Nothing measured: no figures, and zeros in the report, as perftest sends.
        let nothing = Measured::default();
        assert_eq!(nothing.figures(1, Unit::MiB).avg, None);
        assert_eq!(nothing.report(1, Unit::MiB).bw_avg, 0.0);
    }
}
