//! What a network run writes into `--out DIR`:
//!
//! * `fct.txt`: one line per finished flow in HPCC's layout (`sip dip sport dport size
//!   start_ns fct_ns standalone_fct_ns`, addresses in hex), for HPCC's `fct_analysis.py`;
//! * `slowdown.txt`: fct_analysis.py's table (5 % bins of the flows by size; per bin its start
//!   as a fraction, its largest size, and the p50, p95 and p99 slowdown), after `#` comment lines
//!   naming the columns;
//! * `slowdown.json`: the same table as JSON;
//! * `slowdown.svg`: slowdown against flow size, p50/p95/p99;
//! * `summary.json`: flows, packet-hops, speed, drops, PFC pauses, goodput;
//! * `flow.txt`: the flows run, in HPCC's flow-file format, to feed HPCC's simulator.
//!
//! Nothing is written before the run has finished.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, anyhow};
use roce_sim::fct::write_fct_file;
use roce_sim::network::{FlowVerb, Network};
use roce_sim::workload::write_flow_file;
use roce_sim::{FctRecord, SlowdownTable};
use serde_json::{Value, json};

use super::fct_plot;
use super::network_run::{MEMORY_LIMIT, Plan};

/// Bin width of the slowdown table, percent of the flows (fct_analysis.py's default).
pub(super) const STEP_PERCENT: u32 = 5;

/// `--check`: what the run would be.
pub(super) fn plan_text(plan: &Plan) -> String {
    let s = &plan.scenario;
    let m = &plan.memory;
    let flows = match plan.expected {
        // Not made: what the workload's rates give.
        Some((run, cut)) if cut >= 0.5 => format!(
            "about {run:.0} flows by the workload's rates, not made (about {cut:.0} more start \
             at or after {} s and are left out)",
            plan.until
        ),
        Some((run, _)) => format!("about {run:.0} flows by the workload's rates, not made"),
        None => format!(
            "{} flows ({} start at or after {} s and are left out)",
            plan.flows.len(),
            plan.cut,
            plan.until
        ),
    };
    format!(
        "{}: valid. topology {} ({} hosts, {} switches, {} links); {flows}, run to {} s; \
         congestion {}; buffer {}; memory estimate {:.3} GiB (limit {} GiB)\n",
        s.name,
        s.topology_source,
        s.topology.hosts().count(),
        s.topology.switches().count(),
        s.topology.links().len(),
        plan.end,
        s.congestion.as_str(),
        buffer_text(&s.config.switch),
        m.bytes as f64 / f64::from(1u32 << 30),
        MEMORY_LIMIT >> 30,
    )
}

/// The switches' buffer and PFC thresholds, in words.
fn buffer_text(switch: &roce_sim::SwitchConfig) -> String {
    let bytes = switch.buffer_bytes;
    match (switch.shared, switch.pfc) {
        (Some(shared), Some(_)) => format!(
            "{bytes} B per switch, shared, dynamic PFC thresholds (1/{} of the free space on a \
             host-rate port)",
            1u64 << shared.alpha_shift
        ),
        (Some(_), None) => format!("{bytes} B per switch, shared, no PFC"),
        (None, Some(pfc)) => format!(
            "{bytes} B per egress port, PFC XOFF {} B / XON {} B per ingress",
            pfc.xoff_bytes, pfc.xon_bytes
        ),
        (None, None) => format!("{bytes} B per egress port, no PFC"),
    }
}

/// The header of `slowdown.txt`.
const SLOWDOWN_HEADER: &str = "\
# FCT slowdown by flow size, as HPCC's analysis/fct_analysis.py prints it.
# Flows sorted by size and cut by count into 5 % bins; slowdown = fct / standalone fct, at least 1.
# Columns: bin start (fraction of the flows), largest flow size in the bin (bytes), then the
# 50th, 95th and 99th percentile slowdown of the bin.
";

/// Writes every output file and prints the table (or, with `json`, `summary.json`).
pub(super) fn write_all(
    out: &Path,
    plan: &Plan,
    network: &Network,
    records: &[FctRecord],
    wall_s: f64,
    json: bool,
) -> anyhow::Result<()> {
    let table = SlowdownTable::new(records, STEP_PERCENT).map_err(|e| anyhow!("{e}"))?;
    let summary = summary(plan, network, records, &table, wall_s);
    let svg = fct_plot::plot(&plan.scenario.name, &table)?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create the directory {}", out.display()))?;
    let write = |name: &str, text: String| {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    write("fct.txt", write_fct_file(records))?;
    write("flow.txt", write_flow_file(&plan.flows))?;
    write(
        "slowdown.txt",
        format!("{SLOWDOWN_HEADER}{}", table.to_text()),
    )?;
    write("slowdown.json", table.to_json() + "\n")?;
    write("slowdown.svg", svg)?;
    write("qlen.txt", write_qlen_file(network))?;
    let text = serde_json::to_string_pretty(&summary).context("cannot encode summary.json")?;
    write("summary.json", text.clone() + "\n")?;
    if json {
        println!("{summary}");
    } else {
        print!("{}", summary_text(&summary, &table));
        println!(
            "wrote fct.txt, flow.txt, slowdown.txt, slowdown.json, slowdown.svg, qlen.txt and \
             summary.json in {}",
            out.display()
        );
    }
    Ok(())
}

fn summary(
    plan: &Plan,
    network: &Network,
    records: &[FctRecord],
    table: &SlowdownTable,
    wall_s: f64,
) -> Value {
    let s = &plan.scenario;
    let topology = network.routes().topology();
    let (mut pauses, mut ce_marks) = (0u64, 0u64);
    for sw in topology.switches() {
        for &(peer, _) in topology.neighbors(sw) {
            if let Some(p) = network.port_stats(sw, peer) {
                pauses += p.pauses_sent;
                ce_marks += p.ce_marked;
            }
        }
    }
    // The NICs' retransmissions: under PFC a queue that grows past the ACK timeout
    // retransmits without a drop.
    let (mut timeouts, mut retransmitted) = (0u64, 0u64);
    for h in topology.hosts() {
        if let Some(nic) = network.nic(h) {
            timeouts += nic.stats().retransmit_timeouts;
            retransmitted += nic.stats().retransmitted_packets;
        }
    }
    let outcome = network.flow_outcome();
    let finished_bytes: u64 = records.iter().map(|r| r.size).sum();
    let sim_s = network.now().as_nanos() as f64 / 1e9;
    // Goodput: the finished flows' bytes over the time from the first start to the last finish.
    let first = records.iter().map(|r| r.start).min();
    let last = records.iter().map(|r| r.start + r.fct).max();
    let busy_s = match (first, last) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => 0.0,
    };
    let hops = network.packet_hops();
    let bins: Vec<Value> = table
        .bins
        .iter()
        .map(|b| json!({"max_size": b.max_size, "p50": b.p50, "p95": b.p95, "p99": b.p99}))
        .collect();
    json!({
        "name": s.name,
        "topology": s.topology_source,
        "hosts": topology.hosts().count(),
        "switches": topology.switches().count(),
        "congestion": s.congestion.as_str(),
        "verb": match s.config.verb {
            FlowVerb::Write => "write",
            FlowVerb::Read => "read",
        },
        "flows_started": outcome.started,
        "flows_finished": outcome.finished,
        "flows_unfinished": outcome.unfinished,
        "flows_failed": outcome.failed,
        "flows_retry_exceeded": outcome.retry_exceeded,
        "flows_not_started": plan.cut,
        "until_s": plan.until.as_nanos() as f64 / 1e9,
        "simulated_s": sim_s,
        "packet_hops": hops,
        "packet_hops_per_s": hops as f64 / wall_s.max(1e-9),
        "wall_s": wall_s,
        "drops": network.drops(),
        "pfc_pauses": pauses,
        "ce_marks": ce_marks,
        "retransmit_timeouts": timeouts,
        "retransmitted_packets": retransmitted,
        "finished_bytes": finished_bytes,
        "goodput_gbps": finished_bytes as f64 * 8.0 / busy_s.max(1e-12) / 1e9,
        "memory_estimate_bytes": plan.memory.bytes,
        "queue_kb": queue_summary(network),
        "slowdown": bins,
        "deadlock": network.deadlock().map(|d| json!({
            "since_ns": d.since.as_nanos(),
            "confirmed_ns": d.confirmed.as_nanos(),
            "cycle": d.cycle.iter().map(|q| json!({
                "switch": q.switch.0,
                "towards": q.towards.0,
                "priority": q.priority,
            })).collect::<Vec<_>>(),
            "text": d.to_string(),
        })),
    })
}

/// The switch ports' sampled queue lengths, pooled: `{"every_ns", "samples", "p50", "p95",
/// "p99", "max"}` in KB (1000 bytes; a bin's lower edge), `null` without samples.
fn queue_summary(network: &Network) -> Value {
    let q = network.queue_lengths();
    if q.samples == 0 {
        return Value::Null;
    }
    let [p50, p95, p99, max] = q.quantiles_kb([0.5, 0.95, 0.99, 1.0]);
    json!({
        "every_ns": q.every.as_nanos() as u64,
        "samples": q.samples,
        "ports": q.ports.len(),
        "p50": p50,
        "p95": p95,
        "p99": p99,
        "max": max,
    })
}

/// `qlen.txt` in the layout of HPCC's `monitor_buffer` dump: a `time: NS` line (the end of the
/// run), then per switch port `switch device count0 count1 ...`, where `device` is HPCC's
/// device index (the port in the switch's neighbour order, plus 1) and `countK` the samples of
/// K to K + 1 KB. After `#` lines naming the columns and the interval.
fn write_qlen_file(network: &Network) -> String {
    let q = network.queue_lengths();
    let mut out = format!(
        "# Queue length of every switch egress port, sampled every {} ns ({} samples), as HPCC's\n\
         # qlen file: switch id, device index (port + 1), then the samples in each 1 KB bin.\n\
         time: {}\n",
        q.every.as_nanos(),
        q.samples,
        network.now().as_nanos()
    );
    for (switch, port, bins) in &q.ports {
        let _ = write!(out, "{switch} {}", port + 1);
        for n in bins {
            let _ = write!(out, " {n}");
        }
        out.push('\n');
    }
    out
}

fn summary_text(summary: &Value, table: &SlowdownTable) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "roce sim {}: {} hosts, congestion {}{}; flows {} started, {} finished, {} unfinished, {} \
         failed ({} retry exceeded); {:.6} s simulated in {:.2} s wall, {} packet-hops ({:.0} per \
         second); drops {}, PFC pauses {}, CE marks {}, retransmission timeouts {}; goodput {:.3} \
         Gb/s",
        summary["name"].as_str().unwrap_or(""),
        summary["hosts"],
        summary["congestion"].as_str().unwrap_or(""),
        if summary["verb"] == "read" {
            ", READ flows"
        } else {
            ""
        },
        summary["flows_started"],
        summary["flows_finished"],
        summary["flows_unfinished"],
        summary["flows_failed"],
        summary["flows_retry_exceeded"],
        summary["simulated_s"].as_f64().unwrap_or(0.0),
        summary["wall_s"].as_f64().unwrap_or(0.0),
        summary["packet_hops"],
        summary["packet_hops_per_s"].as_f64().unwrap_or(0.0),
        summary["drops"],
        summary["pfc_pauses"],
        summary["ce_marks"],
        summary["retransmit_timeouts"],
        summary["goodput_gbps"].as_f64().unwrap_or(0.0),
    );
    if let Some(text) = summary["deadlock"]["text"].as_str() {
        let _ = writeln!(out, "{text}; the run stopped there");
    }
    let q = &summary["queue_kb"];
    if !q.is_null() {
        let _ = writeln!(
            out,
            "switch queues ({} ports, sampled every {} ns): p50 {} KB, p95 {} KB, p99 {} KB, max {} KB",
            q["ports"], q["every_ns"], q["p50"], q["p95"], q["p99"], q["max"]
        );
    }
    let _ = writeln!(
        out,
        "FCT slowdown, {} flows in {} % bins by size:",
        table.flows, table.step_percent
    );
    let _ = writeln!(out, " bin   max size B      p50      p95      p99");
    for b in &table.bins {
        let _ = writeln!(
            out,
            "{:.2} {:>12} {:>8.3} {:>8.3} {:>8.3}",
            b.percentile, b.max_size, b.p50, b.p95, b.p99
        );
    }
    out
}
