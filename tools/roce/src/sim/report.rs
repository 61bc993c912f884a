//! What `roce sim` reports: the summary (text, or JSON with `--json`) and `series.json`.
//!
//! `series.json` is a function of the scenario alone, so two runs of one file write the same
//! bytes; the wall-clock figures (`wall_s`, `packet_hops_per_s`, `sim_packets_per_s`) are only
//! in the summary on standard output.

use std::fmt::Write as _;

use roce_core::Duration;
use roce_sim::Series;
use roce_sim::file::scenario::Loaded;
use roce_sim::scenario::jain_index;
use serde_json::{Value, json};

pub(super) fn gbps(bps: f64) -> f64 {
    bps / 1e9
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The summary of a run: what `series.json` holds under "summary" (nothing of the wall clock).
pub(super) fn summarise(loaded: &Loaded, series: &Series) -> Value {
    let s = &loaded.scenario;
    // An interrupted run is summed up over the time it reached.
    let (from, to) = (loaded.summary_from, series.stopped_at.unwrap_or(s.duration));
    let means: Vec<f64> = (0..s.flows.len())
        .map(|f| series.mean_goodput(f, from, to))
        .collect();
    let flows: Vec<Value> = s
        .flows
        .iter()
        .zip(&series.flows)
        .zip(&means)
        .map(|((flow, fs), mean)| {
            json!({
                "src": flow.from,
                "dst": flow.to,
                "start_us": flow.start.as_micros() as u64,
                "dscp": flow.dscp,
                "mean_goodput_gbps": gbps(*mean),
                "bytes": fs.bytes,
                "delivered_bytes": fs.delivered_bytes,
                "finished_ms": fs.finished.map(ms),
                "cnps_received": fs.cnps,
            })
        })
        .collect();
    let mut summary = json!({
        "name": s.name,
        "congestion": loaded.congestion.as_str(),
        "hosts": s.hosts,
        "bottleneck": s.bottleneck,
        "duration_ms": ms(s.duration),
        "interrupted_at_ms": series.stopped_at.map(ms),
        "window_ms": [ms(from), ms(to)],
        "flows": flows,
        "jain_index": jain_index(&means),
        "total_goodput_gbps": gbps(means.iter().sum()),
        "queue_max_bytes": series.queue_max(Duration::ZERO, to),
        "queue_max_in_window_bytes": series.queue_max(from, to),
        "drops": Series::total(&series.drops),
        "pauses": Series::total(&series.pauses),
        "ce_marks": Series::total(&series.ce_marks),
        "cnps": Series::total(&series.cnps),
        "retransmitted_packets": series.retransmitted_packets,
        "switched_packets": series.switched_packets,
        "packet_hops": series.packet_hops,
    });
    // Only when it is not the default, so that a go-back-N run's files stay as they were.
    if let roce_core::LossRecovery::SelectiveRepeat { bdp_packets, .. } = s.nic.loss_recovery {
        summary["loss_recovery"] = json!("selective-repeat");
        summary["window_packets"] = json!(bdp_packets);
    } else if s.nic.max_unacked_psns != roce_core::NicConfig::default().max_unacked_psns {
        summary["window_packets"] = json!(s.nic.max_unacked_psns);
    }
    summary
}

/// The summary with the wall-clock figures added: what `--json` prints.
pub(super) fn with_timing(summary: &Value, series: &Series, wall_s: f64) -> Value {
    let mut value = summary.clone();
    value["wall_s"] = json!(wall_s);
    // Simulation speed: packets across one link per wall-clock second, the unit of the network
    // runs, and packets through the switch per wall-clock second.
    value["packet_hops_per_s"] = json!(series.packet_hops as f64 / wall_s.max(1e-9));
    value["sim_packets_per_s"] = json!(series.switched_packets as f64 / wall_s.max(1e-9));
    value
}

/// The summary as text; `summary` is [`with_timing`]'s.
pub(super) fn summary_text(loaded: &Loaded, summary: &Value) -> String {
    let s = &loaded.scenario;
    let (from, to) = (ms(loaded.summary_from), ms(s.duration));
    let mut out = String::new();
    let recovery = match s.nic.loss_recovery {
        roce_core::LossRecovery::SelectiveRepeat { bdp_packets, .. } => {
            format!(", selective repeat (BDP cap {bdp_packets} packets)")
        }
        roce_core::LossRecovery::GoBackN if summary.get("window_packets").is_some() => {
            format!(", window {} packets", s.nic.max_unacked_psns)
        }
        roce_core::LossRecovery::GoBackN => String::new(),
    };
    let _ = writeln!(
        out,
        "roce sim {}: {} hosts, {} flows, congestion {}{recovery}, {} ms simulated in {:.2} s \
         ({} packets switched, {:.0} per second; {} packet-hops, {:.0} per second)",
        s.name,
        s.hosts,
        s.flows.len(),
        loaded.congestion.as_str(),
        to,
        summary["wall_s"].as_f64().unwrap_or(0.0),
        summary["switched_packets"],
        summary["sim_packets_per_s"].as_f64().unwrap_or(0.0),
        summary["packet_hops"],
        summary["packet_hops_per_s"].as_f64().unwrap_or(0.0),
    );
    let _ = writeln!(
        out,
        "flow   src -> dst   start ms   goodput Gb/s ({from}-{to} ms)   CNPs received"
    );
    let empty = Vec::new();
    for (i, flow) in summary["flows"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .enumerate()
    {
        let _ = writeln!(
            out,
            "{i:>4}   {:>3} -> {:<3}   {:>8.3}   {:>24.3}   {:>13}",
            flow["src"],
            flow["dst"],
            flow["start_us"].as_f64().unwrap_or(0.0) / 1e3,
            flow["mean_goodput_gbps"].as_f64().unwrap_or(0.0),
            flow["cnps_received"],
        );
    }
    let _ = writeln!(
        out,
        "Jain index {:.4}, total {:.3} Gb/s ({from}-{to} ms; 1 Gb/s = 10^9 bit/s)",
        summary["jain_index"].as_f64().unwrap_or(0.0),
        summary["total_goodput_gbps"].as_f64().unwrap_or(0.0)
    );
    let _ = writeln!(
        out,
        "port {} queue max {} B ({} B over {from}-{to} ms); drops {}, pauses {}, CE marks {}, \
         CNPs {}, retransmitted {}",
        s.bottleneck,
        summary["queue_max_bytes"],
        summary["queue_max_in_window_bytes"],
        summary["drops"],
        summary["pauses"],
        summary["ce_marks"],
        summary["cnps"],
        summary["retransmitted_packets"],
    );
    out
}

/// `series.json`: the scenario, the summary and one object per sample.
pub(super) fn series_json(loaded: &Loaded, series: &Series, summary: &Value) -> Value {
    let s = &loaded.scenario;
    let samples: Vec<Value> = series
        .times
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let flows: Vec<Value> = series
                .flows
                .iter()
                .map(|f| {
                    json!({
                        "goodput_bps": f.goodput_bps.get(k).copied().unwrap_or(0.0),
                        "rate_bps": f.rate_bps.get(k).copied().flatten(),
                    })
                })
                .collect();
            let at = |v: &[u64]| v.get(k).copied().unwrap_or(0);
            json!({
                "t_us": t.as_micros() as u64,
                "flows": flows,
                "queue_bytes": series.queue_bytes.get(k).copied().unwrap_or(0),
                "queue_max_bytes": series.queue_max_bytes.get(k).copied().unwrap_or(0),
                "drops": at(&series.drops),
                "pauses": at(&series.pauses),
                "ce_marks": at(&series.ce_marks),
                "cnps": at(&series.cnps),
            })
        })
        .collect();
    json!({
        "name": s.name,
        "sample_us": s.interval.as_micros() as u64,
        "line_rate_bps": s.switch.bandwidth_bps,
        "bottleneck": s.bottleneck,
        "counters": "drops, pauses, ce_marks and cnps are cumulative; goodput_bps is per \
                     interval, the WRITE payload the receiver accepted in sequence in it; \
                     rate_bps is DCQCN's current rate (null without congestion control)",
        "summary": summary,
        "samples": samples,
    })
}
