//! `compare.txt` and `compare.svg` of a sweep along one key (`"network.congestion" = ["dcqcn",
//! "hpcc", "timely", "dctcp"]`): the points' FCT slowdown by flow size side by side, as the HPCC
//! paper's Fig. 11 sets congestion-control algorithms side by side. Each point's table is made
//! from its `fct.txt` as its `slowdown.txt` is (fct_analysis.py's 5 % bins of the flows by size;
//! the p50, p95 and p99 slowdown of each bin), so a column of `compare.txt` is that point's
//! `slowdown.txt`.
//!
//! A grid of several axes compares along one of them ([`compared_axis`]: `network.congestion`
//! if it is one, else the first), in a panel for each combination of the others' values (PFC
//! on and off, say): a table per panel in `compare.txt`, a row of charts per panel in
//! `compare.svg`. A grid of more than [`MAX_PANELS`] panels is not compared.

use std::fmt::Write as _;

use roce_sim::SlowdownTable;

use super::fct_plot;

/// One point of the sweep: its number, the value of the key it takes (as the legend and the
/// columns name it), and its slowdown table, if it ran and wrote its `fct.txt`.
#[derive(Debug)]
pub(super) struct Column {
    pub(super) index: u64,
    pub(super) label: String,
    pub(super) table: Option<SlowdownTable>,
}

/// The most panels a compared grid may have: a page of a row of charts each.
pub(super) const MAX_PANELS: usize = 8;

/// The axis a grid of `keys` (its axes' keys, in order) compares along: `network.congestion`
/// if it is one of them (the paper's comparison), else the first.
pub(super) fn compared_axis(keys: &[&str]) -> usize {
    keys.iter()
        .position(|k| *k == "network.congestion")
        .unwrap_or(0)
}

/// The points that share the values of every axis but the compared one: `values` are those
/// axes' keys and values (none for a grid of one axis).
#[derive(Debug)]
pub(super) struct Panel {
    pub(super) values: Vec<(String, String)>,
    pub(super) columns: Vec<Column>,
}

impl Panel {
    /// `network.loss_recovery = selective-repeat, network.pfc.enabled = false`, as
    /// `compare.txt` names the panel.
    pub(super) fn label(&self) -> String {
        Self::join(self.values.iter().map(|(k, v)| (k.as_str(), v)))
    }

    /// The same without each key's first part where it has several (`loss_recovery =
    /// selective-repeat, pfc.enabled = false`), for the charts' titles.
    fn title(&self) -> String {
        Self::join(
            self.values
                .iter()
                .map(|(k, v)| (k.split_once('.').map_or(k.as_str(), |(_, rest)| rest), v)),
        )
    }

    fn join<'a>(pairs: impl Iterator<Item = (&'a str, &'a String)>) -> String {
        pairs
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `compare.txt` of `panels`: [`text`] of each, under a `# panel:` line naming it where
/// there are several.
pub(super) fn text_panels(key: &str, panels: &[Panel]) -> String {
    match panels {
        [one] if one.values.is_empty() => text(key, &one.columns),
        _ => panels
            .iter()
            .map(|p| format!("# panel: {}\n{}", p.label(), text(key, &p.columns)))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// `compare.svg` of `panels`: [`svg`] for one, else a row of charts per panel.
pub(super) fn svg_panels(name: &str, key: &str, panels: &[Panel]) -> anyhow::Result<String> {
    match panels {
        [one] if one.values.is_empty() => svg(name, key, &one.columns),
        _ => {
            let rows: Vec<(String, Vec<(String, &SlowdownTable)>)> = panels
                .iter()
                .map(|p| (p.title(), runs(&p.columns)))
                .collect();
            let caption = format!("roce sim sweep {name}: FCT slowdown by flow size, by {key}");
            fct_plot::compare_panels(&caption, &rows)
        }
    }
}

/// The value of a point's key as a label: a string as it is (`dcqcn`), any other value as TOML
/// writes it (`0.3`, `102400`, `true`).
pub(super) fn label(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// `compare.txt`: after `#` lines saying what it is and what each point is, a row per bin
/// (its start as a fraction of the flows, and its largest flow size), then a p50, p95 and p99
/// column for each point that has a table, `-` where it has no such bin.
pub(super) fn text(key: &str, columns: &[Column]) -> String {
    let mut out = format!(
        "# roce sim sweep: FCT slowdown by flow size for each value of {key}, side by side.\n\
         # Each point's fct.txt as its slowdown.txt tables it: flows sorted by size and cut by \
         count into 5 % bins;\n# slowdown = fct / standalone fct, at least 1.\n"
    );
    let with: Vec<(&Column, &SlowdownTable)> = columns
        .iter()
        .filter_map(|c| c.table.as_ref().map(|t| (c, t)))
        .collect();
    for c in columns {
        let _ = match &c.table {
            Some(t) => writeln!(
                out,
                "# point {}: {key} = {}, {} flows",
                c.index, c.label, t.flows
            ),
            None => writeln!(
                out,
                "# point {}: {key} = {}, no fct.txt (it failed, or has not run): no column",
                c.index, c.label
            ),
        };
    }
    // The bins of the longest table; its sizes name the rows.
    let rows = with
        .iter()
        .rev()
        .map(|(_, t)| t)
        .max_by_key(|t| t.bins.len())
        .map_or(&[][..], |t| &t.bins[..]);
    let sizes_differ = with.iter().any(|(_, t)| {
        t.bins.len() != rows.len()
            || t.bins
                .iter()
                .zip(rows)
                .any(|(a, b)| a.max_size != b.max_size)
    });
    if sizes_differ {
        out.push_str(
            "# The points finished different flows, so their bins end at different sizes: \
             max_size is the first point's with the most bins.\n",
        );
    }
    out.push_str("# bin\tmax_size");
    for (c, _) in &with {
        for p in ["p50", "p95", "p99"] {
            let _ = write!(out, "\t{}:{p}", c.label);
        }
    }
    out.push('\n');
    for (i, row) in rows.iter().enumerate() {
        let _ = write!(out, "{:.3}\t{}", row.percentile, row.max_size);
        for (_, t) in &with {
            let _ = match t.bins.get(i) {
                Some(b) => write!(out, "\t{:.3}\t{:.3}\t{:.3}", b.p50, b.p95, b.p99),
                None => write!(out, "\t-\t-\t-"),
            };
        }
        out.push('\n');
    }
    out
}

/// `compare.svg`: a chart per percentile, a curve per point that has a table.
pub(super) fn svg(name: &str, key: &str, columns: &[Column]) -> anyhow::Result<String> {
    let caption = format!("roce sim sweep {name}: FCT slowdown by flow size, by {key}");
    fct_plot::compare(&caption, &runs(columns))
}

/// The columns that have a table, as the plot's runs: each its label and its table.
fn runs(columns: &[Column]) -> Vec<(String, &SlowdownTable)> {
    columns
        .iter()
        .filter_map(|c| c.table.as_ref().map(|t| (c.label.clone(), t)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_sim::fct::SlowdownBin;

    fn table(flows: usize, bins: &[(u64, f64)]) -> SlowdownTable {
        SlowdownTable {
            step_percent: 5,
            flows,
            bins: bins
                .iter()
                .enumerate()
                .map(|(i, &(max_size, s))| SlowdownBin {
                    percentile: i as f64 * 0.05,
                    max_size,
                    flows: flows / bins.len(),
                    p50: s,
                    p95: 2.0 * s,
                    p99: 3.0 * s,
                })
                .collect(),
        }
    }

    #[test]
    fn a_column_group_per_point_and_a_row_per_bin() {
        let columns = [
            Column {
                index: 0,
                label: "dcqcn".into(),
                table: Some(table(40, &[(300, 1.5), (9000, 2.0)])),
            },
            Column {
                index: 1,
                label: "hpcc".into(),
                table: Some(table(40, &[(300, 1.25), (9000, 1.0)])),
            },
            Column {
                index: 2,
                label: "timely".into(),
                table: None,
            },
        ];
        let text = text("network.congestion", &columns);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"# point 0: network.congestion = dcqcn, 40 flows"));
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("# point 2: network.congestion = timely, no fct.txt"))
        );
        assert!(!text.contains("different flows"), "{text}");
        let rows: Vec<&str> = lines
            .iter()
            .copied()
            .skip_while(|l| !l.starts_with("# bin"))
            .collect();
        assert_eq!(
            rows,
            [
                "# bin\tmax_size\tdcqcn:p50\tdcqcn:p95\tdcqcn:p99\thpcc:p50\thpcc:p95\thpcc:p99",
                "0.000\t300\t1.500\t3.000\t4.500\t1.250\t2.500\t3.750",
                "0.050\t9000\t2.000\t4.000\t6.000\t1.000\t2.000\t3.000",
            ]
        );
    }

    #[test]
    fn points_of_different_flows_are_said_to_differ() {
        let columns = [
            Column {
                index: 0,
                label: "0.3".into(),
                table: Some(table(20, &[(300, 1.0)])),
            },
            Column {
                index: 1,
                label: "0.5".into(),
                table: Some(table(40, &[(300, 1.0), (700, 2.0)])),
            },
        ];
        let text = text("workload.load", &columns);
        assert!(text.contains("finished different flows"), "{text}");
        assert!(
            text.ends_with("0.050\t700\t-\t-\t-\t2.000\t4.000\t6.000\n"),
            "{text}"
        );
        assert_eq!(label(&serde_json::json!("dcqcn")), "dcqcn");
        assert_eq!(label(&serde_json::json!(0.3)), "0.3");
    }
}
