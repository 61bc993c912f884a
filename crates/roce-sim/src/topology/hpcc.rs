//! HPCC's topology file, as `alibaba-edu/High-Precision-Congestion-Control:simulation/scratch/third.cc`
//! reads it (`topof >> node_num >> switch_num >> link_num`, then the switch ids, then per link
//! `topof >> src >> dst >> data_rate >> link_delay >> error_rate`) and as `simulation/mix/fat.txt`
//! writes it:
//!
//! ```text
//! 376 56 480                          node_num switch_num link_num
//! 320 321 322 … 375                   the switch_num switch ids; every other node is a host
//! 0 320 100Gbps 1000ns 0.000000       src dst rate delay error_rate, link_num lines
//! ```
//!
//! Rates are ns-3 `DataRate` strings and delays ns-3 `Time` strings; we accept the units those
//! files use (`bps`, `Kbps`, `Mbps`, `Gbps`, `Tbps`; `s`, `ms`, `us`, `ns`) with an optional
//! decimal point, and refuse anything that is not a whole bit/s or nanosecond. third.cc reads
//! whitespace-separated tokens and ignores what follows the last link; we read lines, so a field
//! error can name its line, accept the switch ids spread over several lines, skip blank lines and
//! `#` comments (HPCC's files have none), and refuse lines beyond `link_num`.

use core::fmt;
use core::fmt::Write as _;
use std::collections::HashSet;

use roce_core::Duration;

use super::{LinkSpec, NodeId, NodeKind, Topology, TopologyError};
use crate::decimal;

/// Why a topology file was refused: the file, the 1-based line and what was wrong there.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}: {kind}")]
pub struct HpccParseError {
    /// The file name given to the parser.
    pub file: String,
    /// The line (from 1) at fault; the last line for something missing at the end.
    pub line: usize,
    /// What was wrong.
    pub kind: HpccParseErrorKind,
}

/// What was wrong on the line of an [`HpccParseError`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HpccParseErrorKind {
    /// No header line.
    #[error("empty file: expected a header `node_num switch_num link_num`")]
    Empty,
    /// A header that is not three whole numbers.
    #[error("header {0:?}: expected three whole numbers `node_num switch_num link_num`")]
    BadHeader(String),
    /// A node id that is not a whole number.
    #[error("{field} {value:?}: expected a node id (a whole number)")]
    BadNodeId {
        /// Which field (`switch id`, `link src`, `link dst`).
        field: &'static str,
        /// The text found.
        value: String,
    },
    /// A switch id at or beyond `node_num`.
    #[error("switch id {id} is not below node_num {nodes}")]
    SwitchOutOfRange {
        /// The id.
        id: u32,
        /// The header's node count.
        nodes: usize,
    },
    /// A switch id listed twice.
    #[error("switch id {0} is listed twice")]
    DuplicateSwitch(u32),
    /// A link line without its five fields.
    #[error("expected 5 fields `src dst rate delay error_rate`, got {0}")]
    FieldCount(usize),
    /// A rate ns-3 would not read, or not a whole bit/s.
    #[error("link rate {0:?}: expected a number followed by bps/Kbps/Mbps/Gbps")]
    BadRate(String),
    /// A delay ns-3 would not read, or not a whole nanosecond.
    #[error("link delay {0:?}: expected a number followed by s/ms/us/ns")]
    BadDelay(String),
    /// An error rate that is not a number in [0, 1].
    #[error("error rate {0:?}: expected a number in [0, 1]")]
    BadErrorRate(String),
    /// The file ended before `switch_num` switch ids.
    #[error("expected {want} switch ids, found {got}")]
    MissingSwitches {
        /// The header's switch count.
        want: usize,
        /// How many the file has.
        got: usize,
    },
    /// The file ended before `link_num` links.
    #[error("expected {want} links, found {got}")]
    MissingLinks {
        /// The header's link count.
        want: usize,
        /// How many the file has.
        got: usize,
    },
    /// A link line after the header's `link_num` links.
    #[error("a link beyond the header's link_num {0}")]
    ExtraLink(usize),
    /// The links do not make a topology (self-link, duplicate, unknown node).
    #[error("{0}")]
    Topology(TopologyError),
}

impl Topology {
    /// Parses HPCC's topology format; `file` names the source in errors.
    pub fn from_hpcc(file: &str, text: &str) -> Result<Self, HpccParseError> {
        let err = |line: usize, kind| HpccParseError {
            file: file.to_owned(),
            line,
            kind,
        };
        let mut lines = crate::text::content_lines(text);
        let last_line = text.lines().count().max(1);

        let (hline, header) = lines
            .next()
            .ok_or_else(|| err(1, HpccParseErrorKind::Empty))?;
        let counts: Vec<usize> = header
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| err(hline, HpccParseErrorKind::BadHeader(header.to_owned())))?;
        let &[node_num, switch_num, link_num] = counts.as_slice() else {
            return Err(err(hline, HpccParseErrorKind::BadHeader(header.to_owned())));
        };
        if switch_num > node_num || node_num > u32::MAX as usize {
            return Err(err(hline, HpccParseErrorKind::BadHeader(header.to_owned())));
        }

        let mut kinds = vec![NodeKind::Host; node_num];
        let mut switches = 0;
        while switches < switch_num {
            let Some((n, line)) = lines.next() else {
                let kind = HpccParseErrorKind::MissingSwitches {
                    want: switch_num,
                    got: switches,
                };
                return Err(err(last_line, kind));
            };
            for tok in line.split_whitespace() {
                let id = node_id(tok, "switch id").map_err(|k| err(n, k))?;
                let slot = kinds.get_mut(id as usize).ok_or_else(|| {
                    err(
                        n,
                        HpccParseErrorKind::SwitchOutOfRange {
                            id,
                            nodes: node_num,
                        },
                    )
                })?;
                if *slot == NodeKind::Switch {
                    return Err(err(n, HpccParseErrorKind::DuplicateSwitch(id)));
                }
                *slot = NodeKind::Switch;
                switches += 1;
            }
            if switches > switch_num {
                let kind = HpccParseErrorKind::MissingSwitches {
                    want: switch_num,
                    got: switches,
                };
                return Err(err(n, kind));
            }
        }

        let mut links = Vec::with_capacity(link_num.min(1 << 20));
        let mut seen = HashSet::new();
        for (n, line) in lines {
            if links.len() == link_num {
                return Err(err(n, HpccParseErrorKind::ExtraLink(link_num)));
            }
            let link = parse_link(line).map_err(|k| err(n, k))?;
            // Check each link as it comes, so that a duplicate or unknown node names its line.
            super::check_link(node_num, &mut seen, link)
                .map_err(|e| err(n, HpccParseErrorKind::Topology(e)))?;
            links.push(link);
        }
        if links.len() < link_num {
            let kind = HpccParseErrorKind::MissingLinks {
                want: link_num,
                got: links.len(),
            };
            return Err(err(last_line, kind));
        }
        Self::new(kinds, links).map_err(|e| err(last_line, HpccParseErrorKind::Topology(e)))
    }

    /// Writes the topology in HPCC's format (`fat.txt` style: rates in the largest unit that
    /// divides them, delays in `ns`, error rates with six decimals), which
    /// [`Topology::from_hpcc`] reads back to the same value.
    pub fn to_hpcc(&self) -> String {
        let mut out = String::new();
        let switches: Vec<String> = self.switches().map(|s| s.to_string()).collect();
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "{} {} {}",
            self.node_count(),
            switches.len(),
            self.links().len()
        );
        let _ = writeln!(out, "{}", switches.join(" "));
        for l in self.links() {
            let _ = writeln!(
                out,
                "{} {} {} {}ns {:.6}",
                l.a,
                l.b,
                Rate(l.rate_bps),
                l.delay.as_nanos(),
                l.error_rate
            );
        }
        out
    }
}

/// A rate as ns-3 writes it in HPCC's files: `100Gbps`, `25Gbps`, `1500Mbps`.
struct Rate(u64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = [
            (1_000_000_000_000, "Tbps"),
            (1_000_000_000, "Gbps"),
            (1_000_000, "Mbps"),
            (1_000, "Kbps"),
        ];
        let (div, unit) = units
            .into_iter()
            .find(|&(d, _)| self.0 != 0 && self.0.is_multiple_of(d))
            .unwrap_or((1, "bps"));
        write!(f, "{}{}", self.0 / div, unit)
    }
}

fn node_id(tok: &str, field: &'static str) -> Result<u32, HpccParseErrorKind> {
    tok.parse().map_err(|_| HpccParseErrorKind::BadNodeId {
        field,
        value: tok.to_owned(),
    })
}

fn parse_link(line: &str) -> Result<LinkSpec, HpccParseErrorKind> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let &[src, dst, rate, delay, error] = fields.as_slice() else {
        return Err(HpccParseErrorKind::FieldCount(fields.len()));
    };
    let a = NodeId(node_id(src, "link src")?);
    let b = NodeId(node_id(dst, "link dst")?);
    let rate_bps = parse_rate(rate).ok_or_else(|| HpccParseErrorKind::BadRate(rate.to_owned()))?;
    let ns = parse_delay(delay).ok_or_else(|| HpccParseErrorKind::BadDelay(delay.to_owned()))?;
    let error_rate = error
        .parse::<f64>()
        .ok()
        .filter(|e| (0.0..=1.0).contains(e))
        .ok_or_else(|| HpccParseErrorKind::BadErrorRate(error.to_owned()))?;
    Ok(LinkSpec {
        a,
        b,
        rate_bps,
        delay: Duration::from_nanos(ns),
        error_rate,
    })
}

/// An ns-3 `DataRate` string in the units HPCC's files use, in bit/s (nonzero).
pub(crate) fn parse_rate(text: &str) -> Option<u64> {
    let units = [
        ("Tbps", 1_000_000_000_000),
        ("Gbps", 1_000_000_000),
        ("Mbps", 1_000_000),
    ];
    let units = units
        .into_iter()
        .chain([("Kbps", 1_000), ("kbps", 1_000), ("bps", 1)]);
    let (number, unit) = units
        .into_iter()
        .find_map(|(suffix, unit)| text.strip_suffix(suffix).map(|n| (n, unit)))?;
    decimal::scaled(number, unit).filter(|&r| r > 0)
}

/// An ns-3 `Time` string in the units HPCC's files use, in nanoseconds.
fn parse_delay(text: &str) -> Option<u64> {
    // "ms", "us" and "ns" before "s", which they end with.
    let units = [
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
        ("s", 1_000_000_000),
    ];
    let (number, unit) = units
        .into_iter()
        .find_map(|(suffix, unit)| text.strip_suffix(suffix).map(|n| (n, unit)))?;
    decimal::scaled(number, unit)
}

#[cfg(test)]
#[path = "hpcc_tests.rs"]
mod tests;
