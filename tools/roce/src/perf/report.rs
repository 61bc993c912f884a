//! What `roce perf` measured, and how it prints it: perftest's tables, or JSON.

use std::time::Duration;

use roce_core::Qpn;
use roce_device::DeviceHandle;
use roce_oob::perftest::{BwReport, Kind, Test};
use roce_sim::scenario::jain_index;
use serde_json::json;

use super::Args;
use super::traffic::PerQp;
use crate::device::CcKind;

/// What a run measured.
#[derive(Debug, Default, Clone)]
pub(super) struct Measured {
    pub(super) elapsed: Duration,
    /// One-way latencies, for latency tests.
    pub(super) samples: Vec<Duration>,
    /// From the peer's report only.
    pub(super) reported: Option<(f64, f64, f64)>,
    /// Bandwidth tests that see completions: what each QP did.
    pub(super) per_qp: Option<PerQp>,
}

impl Measured {
    pub(super) fn report(&self, size: u32, iters: u64) -> BwReport {
        let (peak, avg, rate) = self.bandwidth(size, iters);
        BwReport {
            size: u64::from(size),
            iters,
            bw_peak: peak,
            bw_avg: avg,
            msg_rate_avg: rate,
        }
    }

    /// Each QP's goodput in MB/s while all QPs were busy, and Jain's fairness index of them
    /// (`None` without per-QP completions).
    pub(super) fn fairness(&self, size: u32) -> Option<(Vec<f64>, f64)> {
        let per_qp = self.per_qp.as_ref()?;
        let (interval, done) = per_qp.busy.as_ref()?;
        let secs = interval.as_secs_f64();
        let rates: Vec<f64> = done
            .iter()
            .map(|&n| {
                if secs > 0.0 {
                    f64::from(size) * f64::from(n) / secs / 1e6
                } else {
                    0.0
                }
            })
            .collect();
        let jain = jain_index(&rates);
        Some((rates, jain))
    }

    pub(super) fn from_report(report: &BwReport) -> Self {
        Self {
            reported: Some((report.bw_peak, report.bw_avg, report.msg_rate_avg)),
            ..Self::default()
        }
    }

    /// perftest's units: MB/sec as perftest 4.5-0.17 counts them, 2^20 bytes per second
    /// (`print_report_bw`: `format_factor = 0x100000` unless `--report_gbits`), and Mpps. These
    /// go into the report the peer prints, and into the text table, as perftest's do.
    pub(super) fn bandwidth(&self, size: u32, iters: u64) -> (f64, f64, f64) {
        if let Some(reported) = self.reported {
            return reported;
        }
        let secs = self.elapsed.as_secs_f64();
        if secs <= 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let avg = f64::from(size) * iters as f64 / secs / MIB;
        (avg, avg, iters as f64 / secs / 1e6)
    }
}

/// Bytes in perftest's "MB".
const MIB: f64 = 1_048_576.0;

/// perftest's MB/sec (2^20 bytes per second) as MB/s of 10^6 bytes, the unit of `--json`.
fn mb_per_s(perftest_mb: f64) -> f64 {
    perftest_mb * MIB / 1e6
}

pub(super) async fn print_result(
    args: &Args,
    test: Test,
    size: u32,
    iters: u64,
    m: &Measured,
    device: &DeviceHandle,
    qpn: Qpn,
) -> anyhow::Result<()> {
    let stats = device.stats().await?;
    let cc = device.qp_congestion(qpn).await?;
    // The QP's congestion control, in the JSON result and (when on) in a line of text.
    let congestion = json!({
        "algorithm": format!("{:?}", args.device.cc).to_lowercase(),
        "rate_bps": cc.rate_bps, "target_bps": cc.target_bps, "alpha": cc.alpha,
        "cnps_sent": cc.cnps_sent, "cnps_received": cc.cnps_received,
        "rate_decreases": stats.rate_decreases, "rate_increases": stats.rate_increases,
    });
    if !args.json && args.device.cc != CcKind::None {
        let mbps =
            |r: Option<u64>| r.map_or_else(|| "-".to_owned(), |r| format!("{:.1}", r as f64 / 1e6));
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
    let line = "-".repeat(87);
    if test.kind == Kind::Bandwidth {
        let (peak, avg, rate) = m.bandwidth(size, iters);
        let fairness = m.fairness(size);
        if args.json {
            let per_qp_bytes = m.per_qp.as_ref().map(|p| {
                p.done
                    .iter()
                    .map(|&n| u64::from(n) * u64::from(size))
                    .collect::<Vec<_>>()
            });
            println!(
                "{}",
                json!({
                    "test": format!("{:?}_bw", test.verb).to_lowercase(), "bytes": size, "iterations": iters,
                    "bw_peak_mb_s": mb_per_s(peak), "bw_avg_mb_s": mb_per_s(avg), "msg_rate_mpps": rate,
                    "qps": args.qps, "per_qp_bytes": per_qp_bytes,
                    "per_qp_mb_s": fairness.as_ref().map(|f| &f.0), "jain": fairness.as_ref().map(|f| f.1),
                    "retransmitted_packets": stats.retransmitted_packets, "congestion": congestion,
                    "rx_dropped": stats.rx_dropped(), "rx_icrc_errors": stats.rx_icrc_errors,
                    "rx_icrc_unverifiable": stats.rx_icrc_unverifiable,
                })
            );
        } else {
            println!("{line}");
            println!(
                " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
            );
            println!(
                " {size:<10} {iters:<10}       {peak:<10.2}         {avg:<10.2}           {rate:.6}"
            );
            println!("{line}");
            if let Some((rates, jain)) = fairness.filter(|_| args.qps > 1) {
                let (min, max) = rates.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &r| {
                    (lo.min(r), hi.max(r))
                });
                println!(
                    " {} QPs while all were busy: per-QP BW [MB/sec] min {:.2}, max {:.2}; Jain's fairness index {jain:.4}",
                    args.qps,
                    min * 1e6 / MIB,
                    max * 1e6 / MIB
                );
            }
        }
    } else {
        let mut us: Vec<f64> = m.samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        us.sort_by(f64::total_cmp);
        let pick = |q: f64| {
            us.get(((us.len() as f64 * q) as usize).min(us.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0.0)
        };
        let avg = if us.is_empty() {
            0.0
        } else {
            us.iter().sum::<f64>() / us.len() as f64
        };
        let stdev = if us.is_empty() {
            0.0
        } else {
            (us.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / us.len() as f64).sqrt()
        };
        let (min, max, typical) = (pick(0.0), pick(1.0), pick(0.5));
        if args.json {
            println!(
                "{}",
                json!({
                    "test": format!("{:?}_lat", test.verb).to_lowercase(), "bytes": size, "iterations": iters,
                    "t_min_us": min, "t_max_us": max, "t_typical_us": typical, "t_avg_us": avg, "t_stdev_us": stdev,
                    "p99_us": pick(0.99), "p999_us": pick(0.999), "retransmitted_packets": stats.retransmitted_packets,
                    "rx_dropped": stats.rx_dropped(), "rx_icrc_errors": stats.rx_icrc_errors,
                    "rx_icrc_unverifiable": stats.rx_icrc_unverifiable,
                    "congestion": congestion,
                })
            );
        } else if us.is_empty() {
            println!("{line}\n (the client measures this test)\n{line}");
        } else {
            println!("{line}");
            println!(
                " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
            );
            println!(
                " {size:<6} {iters:<10}     {min:<10.2}     {max:<10.2}   {typical:<10.2}       {avg:<10.2}     {stdev:<10.2}      {:<10.2}             {:<10.2}",
                pick(0.99),
                pick(0.999)
            );
            println!("{line}");
        }
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
            ..Measured::default()
        };
        let report = measured.report(1 << 20, 1);
        assert_eq!((report.bw_avg, report.msg_rate_avg), (1.0, 1e-6));
        assert_eq!(mb_per_s(report.bw_avg), 1.048_576);
        // A peer's report is shown in its own units.
        let shown = Measured::from_report(&report).bandwidth(0, 0);
        assert_eq!(shown, (1.0, 1.0, 1e-6));
    }
}
