//! The FCT-slowdown table of HPCC's `analysis/fct_analysis.py`: flows sorted by size, cut by
//! count into bins of `step` percent (`l = i * n / 100`, `r = (i + step) * n / 100`, integer
//! division, for `i` in `0, step, …, < 100`), and per bin the size of its last (largest) flow and
//! the 50th, 95th and 99th percentile slowdown, each `a[int(len(a) * p)]` of the bin's sorted
//! slowdowns (`get_pctl`). The filters the script applies (dport 100 or 200, start before `-T`)
//! are the caller's: pass the records wanted.
//!
//! Where we differ: the script sorts `size slowdown` lines with `sort -n`, which breaks size
//! ties by comparing the lines as text; we break them by slowdown as a number (only which of
//! several equal-size flows lands on either side of a bin edge can change). The script fails on
//! an empty bin (fewer than 100 / step flows); we leave it out.

use core::fmt::Write as _;

use super::FctRecord;

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlowdownBin {
    /// Where the bin starts, as a fraction of the flows (0.00, 0.05, …): the script's first column.
    pub percentile: f64,
    /// Size of the bin's largest flow, bytes.
    pub max_size: u64,
    /// Flows in the bin.
    pub flows: usize,
    /// Median slowdown.
    pub p50: f64,
    /// 95th-percentile slowdown.
    pub p95: f64,
    /// 99th-percentile slowdown.
    pub p99: f64,
}

/// The slowdown table for one set of flows.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowdownTable {
    /// Bin width in percent of the flows (fct_analysis.py `-s`, 5 by default).
    pub step_percent: u32,
    /// Flows counted.
    pub flows: usize,
    /// The non-empty bins, smallest flows first.
    pub bins: Vec<SlowdownBin>,
}

/// Why a table could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// A step outside 1..=100.
    #[error("bin step {0} %: expected 1 to 100")]
    BadStep(u32),
}

impl SlowdownTable {
    /// Bins `records` as fct_analysis.py does, `step_percent` percent of the flows per bin.
    pub fn new<'a>(
        records: impl IntoIterator<Item = &'a FctRecord>,
        step_percent: u32,
    ) -> Result<Self, TableError> {
        if !(1..=100).contains(&step_percent) {
            return Err(TableError::BadStep(step_percent));
        }
        let mut flows: Vec<(u64, f64)> = records
            .into_iter()
            .map(|r| (r.size, r.slowdown()))
            .collect();
        flows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let n = flows.len();
        let step = step_percent as usize;
        let mut bins = Vec::new();
        for i in (0..100).step_by(step) {
            let (l, r) = (i * n / 100, ((i + step) * n / 100).min(n));
            let Some(bin) = flows.get(l..r).filter(|b| !b.is_empty()) else {
                continue;
            };
            let mut slow: Vec<f64> = bin.iter().map(|&(_, s)| s).collect();
            slow.sort_by(f64::total_cmp);
            bins.push(SlowdownBin {
                percentile: i as f64 / 100.0,
                max_size: bin[bin.len() - 1].0,
                flows: bin.len(),
                p50: pctl(&slow, 0.5),
                p95: pctl(&slow, 0.95),
                p99: pctl(&slow, 0.99),
            });
        }
        Ok(Self {
            step_percent,
            flows: n,
            bins,
        })
    }

    /// The table as fct_analysis.py prints one CC's columns: `%.3f %d\t%.3f %.3f %.3f` per bin
    /// (bin start, max size, p50, p95, p99).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for b in &self.bins {
            // Writing to a String cannot fail.
            let _ = writeln!(
                out,
                "{:.3} {}\t{:.3} {:.3} {:.3}",
                b.percentile, b.max_size, b.p50, b.p95, b.p99
            );
        }
        out
    }

    /// The table as one JSON object: `{"step_percent", "flows", "bins": [{"percentile",
    /// "max_size", "flows", "p50", "p95", "p99"}]}`; a non-finite slowdown is `null`.
    pub fn to_json(&self) -> String {
        let mut out = format!(
            "{{\"step_percent\":{},\"flows\":{},\"bins\":[",
            self.step_percent, self.flows
        );
        for (i, b) in self.bins.iter().enumerate() {
            let _ = write!(
                out,
                "{}{{\"percentile\":{},\"max_size\":{},\"flows\":{},\"p50\":{},\"p95\":{},\"p99\":{}}}",
                if i == 0 { "" } else { "," },
                json_number(b.percentile),
                b.max_size,
                b.flows,
                json_number(b.p50),
                json_number(b.p95),
                json_number(b.p99)
            );
        }
        out.push_str("]}");
        out
    }
}

/// `get_pctl`: `a[int(len(a) * p)]` of a sorted, non-empty slice (same float product as Python).
fn pctl(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p) as usize).min(sorted.len() - 1);
    sorted[i]
}

fn json_number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".to_owned()
    }
}
