//! HPCC's flow file (`simulation/mix/flow.txt`, read by `scratch/third.cc` `ReadFlowInput`):
//!
//! ```text
//! 2                          the number of flows
//! 2 1 3 100 200000000 2      src dst pg dport size_bytes start_seconds
//! 3 1 3 100 200000000 2
//! ```
//!
//! Flows must be in ascending start time (flow.txt: "Please order the flows in ascending
//! start_time!"). third.cc reads exactly the declared count and ignores what follows, and the
//! shipped `mix/flow.txt` declares 2 and lists 256 more with prose after them; we refuse a count
//! that does not match the lines, since a mismatch is more often a truncated file than a feature.
//! Start times are decimal seconds, kept exact to the nanosecond; blank lines and `#` comments
//! are skipped.

use core::fmt::Write as _;

use roce_core::Instant;

use crate::decimal;
use crate::topology::NodeId;

/// One flow to start: `size_bytes` from `src` to `dst` at `start`, in priority group `pg`, to
/// UDP/application port `dport` (HPCC: 100 for background traffic, 200 for incast, which
/// `fct_analysis.py` tells apart by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowSpec {
    /// Sending host.
    pub src: NodeId,
    /// Receiving host.
    pub dst: NodeId,
    /// Priority group (traffic class) 0–7; HPCC's generator uses 3.
    pub pg: u8,
    /// Destination port.
    pub dport: u16,
    /// Bytes to move.
    pub size_bytes: u64,
    /// When the sender starts.
    pub start: Instant,
}

/// Why a flow file was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}: {kind}")]
pub struct FlowFileError {
    /// The file name given to the parser.
    pub file: String,
    /// The 1-based line at fault.
    pub line: usize,
    /// What was wrong.
    pub kind: FlowFileErrorKind,
}

/// What was wrong on the line of a [`FlowFileError`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowFileErrorKind {
    /// No count line.
    #[error("empty file: expected the number of flows on the first line")]
    Empty,
    /// The first line is not one whole number.
    #[error("flow count {0:?}: expected one whole number")]
    BadCount(String),
    /// A flow line without six fields.
    #[error("expected 6 fields `src dst pg dport size start_s`, got {0}")]
    FieldCount(usize),
    /// A field that does not parse or is out of range.
    #[error(transparent)]
    BadField(#[from] crate::text::BadField),
    /// A flow from a host to itself.
    #[error("src and dst are both {0}")]
    SelfFlow(NodeId),
    /// A flow that starts before the one on the line above.
    #[error(
        "start {this} s is before the previous flow's {previous} s: flows must be in ascending start time"
    )]
    NotSorted {
        /// The previous start.
        previous: Instant,
        /// This start.
        this: Instant,
    },
    /// More or fewer flow lines than the count says.
    #[error("the first line declares {declared} flows, the file has {found}")]
    CountMismatch {
        /// The count on the first line.
        declared: usize,
        /// The flow lines found.
        found: usize,
    },
}

/// Parses a flow file; `file` names the source in errors.
pub fn parse_flow_file(file: &str, text: &str) -> Result<Vec<FlowSpec>, FlowFileError> {
    let err = |line, kind| FlowFileError {
        file: file.to_owned(),
        line,
        kind,
    };
    let mut lines = crate::text::content_lines(text);
    let (cline, count) = lines
        .next()
        .ok_or_else(|| err(1, FlowFileErrorKind::Empty))?;
    let declared: usize = count
        .parse()
        .map_err(|_| err(cline, FlowFileErrorKind::BadCount(count.to_owned())))?;
    let mut flows: Vec<FlowSpec> = Vec::with_capacity(declared.min(1 << 20));
    let mut last_line = cline;
    for (n, line) in lines {
        let flow = parse_flow(line).map_err(|k| err(n, k))?;
        if let Some(prev) = flows.last().filter(|p| p.start > flow.start) {
            let kind = FlowFileErrorKind::NotSorted {
                previous: prev.start,
                this: flow.start,
            };
            return Err(err(n, kind));
        }
        flows.push(flow);
        last_line = n;
        if flows.len() > declared {
            let kind = FlowFileErrorKind::CountMismatch {
                declared,
                found: flows.len(),
            };
            return Err(err(n, kind));
        }
    }
    if flows.len() != declared {
        let kind = FlowFileErrorKind::CountMismatch {
            declared,
            found: flows.len(),
        };
        return Err(err(last_line, kind));
    }
    Ok(flows)
}

/// Writes `flows` in the format above, start times with nine decimals as `traffic_gen.py` does
/// (`%.9f`). [`parse_flow_file`] reads it back to the same flows if they are sorted by start.
pub fn write_flow_file(flows: &[FlowSpec]) -> String {
    let mut out = String::with_capacity(32 * flows.len() + 16);
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{}", flows.len());
    for f in flows {
        let _ = writeln!(
            out,
            "{} {} {} {} {} {}",
            f.src, f.dst, f.pg, f.dport, f.size_bytes, f.start
        );
    }
    out
}

fn parse_flow(line: &str) -> Result<FlowSpec, FlowFileErrorKind> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let &[src, dst, pg, dport, size, start] = fields.as_slice() else {
        return Err(FlowFileErrorKind::FieldCount(fields.len()));
    };
    let bad = |field, value: &str, expected| {
        FlowFileErrorKind::BadField(crate::text::BadField::new(field, value, expected))
    };
    let node = |field, value: &str| {
        value
            .parse()
            .map(NodeId)
            .map_err(|_| bad(field, value, "a host id (a whole number)"))
    };
    let src = node("src", src)?;
    let dst = node("dst", dst)?;
    if src == dst {
        return Err(FlowFileErrorKind::SelfFlow(src));
    }
    let pg = pg
        .parse::<u8>()
        .ok()
        .filter(|&p| p < 8)
        .ok_or_else(|| bad("pg", pg, "a priority group 0-7"))?;
    let dport = dport
        .parse()
        .map_err(|_| bad("dport", dport, "a port 0-65535"))?;
    let size_bytes = size
        .parse::<u64>()
        .ok()
        .filter(|&s| s > 0)
        .ok_or_else(|| bad("size", size, "a whole number of bytes, at least 1"))?;
    let start = decimal::scaled(start, 1_000_000_000)
        .map(Instant::from_nanos)
        .ok_or_else(|| bad("start", start, "seconds, a whole number of nanoseconds"))?;
    Ok(FlowSpec {
        src,
        dst,
        pg,
        dport,
        size_bytes,
        start,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn reads_hpcc_lines() {
        let flows = parse_flow_file(
            "flow.txt",
            "2\n2 1 3 100 200000000 2\n3 1 3 100 5000 2.000001\n",
        )
        .unwrap();
        assert_eq!(flows.len(), 2);
        assert_eq!(
            flows[0],
            FlowSpec {
                src: NodeId(2),
                dst: NodeId(1),
                pg: 3,
                dport: 100,
                size_bytes: 200_000_000,
                start: Instant::from_millis(2000),
            }
        );
        assert_eq!(flows[1].start, Instant::from_nanos(2_000_001_000));
        let text = write_flow_file(&flows);
        assert_eq!(
            text,
            "2\n2 1 3 100 200000000 2.000000000\n3 1 3 100 5000 2.000001000\n"
        );
        assert_eq!(parse_flow_file("again", &text).unwrap(), flows);
    }

    #[test]
    fn malformed_flow_files_name_file_and_line() {
        let cases: &[(&str, &str)] = &[
            ("", "f:1: empty file"),
            ("two\n", "f:1: flow count \"two\""),
            ("1\n1 2 3 100 5\n", "f:2: expected 6 fields"),
            ("1\nx 2 3 100 5 2\n", "f:2: src \"x\""),
            ("1\n1 1 3 100 5 2\n", "f:2: src and dst are both 1"),
            ("1\n1 2 8 100 5 2\n", "f:2: pg \"8\""),
            ("1\n1 2 3 70000 5 2\n", "f:2: dport \"70000\""),
            ("1\n1 2 3 100 0 2\n", "f:2: size \"0\""),
            (
                "1\n1 2 3 100 5 2.0000000001\n",
                "f:2: start \"2.0000000001\"",
            ),
            ("1\n1 2 3 100 5 -1\n", "f:2: start \"-1\""),
            (
                "2\n1 2 3 100 5 2\n1 2 3 100 5 1\n",
                "f:3: start 1.000000000 s is before",
            ),
            (
                "3\n1 2 3 100 5 2\n1 2 3 100 5 2\n",
                "f:3: the first line declares 3 flows, the file has 2",
            ),
            (
                "1\n1 2 3 100 5 2\n\n1 2 3 100 5 2\n",
                "f:4: the first line declares 1 flows, the file has 2",
            ),
            (
                "2\n",
                "f:1: the first line declares 2 flows, the file has 0",
            ),
        ];
        for (text, want) in cases {
            let err = parse_flow_file("f", text).unwrap_err().to_string();
            assert!(
                err.starts_with(want),
                "{text:?}: got {err:?}, want {want:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "[0-9a-z. \\n#-]{0,120}") {
            let _ = parse_flow_file("p", &text);
        }

        #[test]
        fn written_flows_read_back(
            raw in proptest::collection::vec((0u32..50, 1u32..50, 0u8..8, any::<u16>(), 1u64..1 << 40, 0u64..1 << 40), 0..20)
        ) {
            let mut flows: Vec<FlowSpec> = raw.into_iter().map(|(s, d, pg, dport, size, t)| FlowSpec {
                src: NodeId(s), dst: NodeId(s + d), pg, dport, size_bytes: size, start: Instant::from_nanos(t),
            }).collect();
            flows.sort_by_key(|f| f.start);
            prop_assert_eq!(parse_flow_file("w", &write_flow_file(&flows)).unwrap(), flows);
        }
    }
}
