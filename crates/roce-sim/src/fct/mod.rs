//! Flow completion times as HPCC reports them: one [`FctRecord`] per finished flow, its ideal
//! ("standalone") FCT, the slowdown `fct / ideal`, HPCC's `fct.txt` layout, and the slowdown
//! table of `analysis/fct_analysis.py` ([`SlowdownTable`]).
//!
//! The ideal FCT is `scratch/third.cc`'s `qp_finish` (alibaba-edu/High-Precision-Congestion-Control):
//!
//! ```text
//! total_bytes    = size + ceil(size / payload) * header        (header bytes, no INT)
//! standalone_fct = base_rtt + total_bytes * 8e9 / bottleneck   (ns, integer division)
//! base_rtt       = 2 * Σ link delay + Σ payload * 8e9 / link rate   (pairRtt, per hop rounded)
//! ```
//!
//! where `header` is `CustomHeader::GetStaticWholeHeaderSize() - IntHeader::GetStaticSize()` =
//! 14 (PPP, sized as Ethernet) + 20 (IPv4) + 8 (UDP) + 4 (sequence number) + 2 (pg) = 48 bytes
//! (`src/network/utils/custom-header.cc`), and `payload` is `PACKET_PAYLOAD_SIZE`, 1000 in HPCC's
//! configurations. [`IdealModel::HPCC`] holds these two; a simulation of real RoCEv2 packets
//! passes its own (e.g. 42 bytes of Ethernet/IPv4/UDP, 12 of BTH, 4 of ICRC per packet).

mod table;

use core::fmt::Write as _;

use roce_core::{Duration, Instant};

pub use table::{SlowdownBin, SlowdownTable, TableError};

use crate::topology::{NodeId, PathInfo};

/// One finished flow, with what HPCC's `fct.txt` records of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FctRecord {
    /// Sending host.
    pub src: NodeId,
    /// Receiving host.
    pub dst: NodeId,
    /// UDP source port (HPCC: 10000, 10001, … per sending host).
    pub sport: u16,
    /// Destination port (HPCC: 100 background, 200 incast).
    pub dport: u16,
    /// Bytes moved.
    pub size: u64,
    /// When the flow started.
    pub start: Instant,
    /// Completion time: from start to the last byte acknowledged.
    pub fct: Duration,
    /// The flow's FCT alone in the network ([`ideal_fct`]).
    pub ideal: Duration,
}

impl FctRecord {
    /// `fct / ideal`, at least 1, as fct_analysis.py clamps it (`slow<1?1:slow`). An ideal of
    /// zero (no real path) gives infinity unless the FCT is zero too.
    pub fn slowdown(&self) -> f64 {
        if self.ideal.is_zero() {
            return if self.fct.is_zero() {
                1.0
            } else {
                f64::INFINITY
            };
        }
        (self.fct.as_nanos() as f64 / self.ideal.as_nanos() as f64).max(1.0)
    }
}

/// The packetization the ideal FCT assumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdealModel {
    /// Payload bytes per full packet (also the packet whose serialization [`PathInfo`]
    /// sums into the base RTT).
    pub payload_bytes: u64,
    /// Header bytes added to every packet.
    pub header_bytes: u64,
}

impl IdealModel {
    /// HPCC's: 1000-byte payloads, 48 header bytes (see the module documentation).
    pub const HPCC: Self = Self {
        payload_bytes: 1000,
        header_bytes: 48,
    };
}

/// third.cc's standalone FCT of `size` bytes over `path` (found with
/// `Routes::path_info(src, dst, model.payload_bytes)`). A flow of 0 bytes counts as one packet
/// (HPCC's `(size - 1) / payload + 1` wraps around there).
pub fn ideal_fct(size: u64, path: &PathInfo, model: IdealModel) -> Duration {
    let payload = model.payload_bytes.max(1);
    let packets = size.div_ceil(payload).max(1);
    let total = u128::from(size) + u128::from(packets) * u128::from(model.header_bytes);
    let serialize = total * 8_000_000_000 / u128::from(path.bottleneck_bps.max(1));
    path.base_rtt() + Duration::from_nanos(u64::try_from(serialize).unwrap_or(u64::MAX))
}

/// One line of HPCC's `fct.txt`: `sip dip sport dport size start_ns fct_ns ideal_ns`, addresses
/// as 8-digit hex of [`NodeId::hpcc_ipv4`] (third.cc: `"%08x %08x %u %u %lu %lu %lu %lu\n"`).
pub fn fct_line(r: &FctRecord) -> String {
    format!(
        "{:08x} {:08x} {} {} {} {} {} {}",
        r.src.hpcc_ipv4(),
        r.dst.hpcc_ipv4(),
        r.sport,
        r.dport,
        r.size,
        r.start.as_nanos(),
        r.fct.as_nanos(),
        r.ideal.as_nanos()
    )
}

/// The whole `fct.txt`, one [`fct_line`] per record, in the order given (HPCC writes them in
/// completion order).
pub fn write_fct_file<'a>(records: impl IntoIterator<Item = &'a FctRecord>) -> String {
    let mut out = String::new();
    for r in records {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{}", fct_line(r));
    }
    out
}

/// Why an `fct.txt` line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {kind}")]
pub struct FctParseError {
    /// The file name given to the parser.
    pub file: String,
    /// The 1-based line.
    pub line: usize,
    /// What was wrong.
    pub kind: FctParseErrorKind,
}

/// What was wrong on the line of an [`FctParseError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FctParseErrorKind {
    /// Not eight fields.
    #[error("expected 8 fields `sip dip sport dport size start_ns fct_ns ideal_ns`, got {0}")]
    FieldCount(usize),
    /// A field that does not parse.
    #[error(transparent)]
    BadField(#[from] crate::text::BadField),
}

/// Reads an `fct.txt` (ours or HPCC's) back into records; blank and `#` lines are skipped.
pub fn parse_fct_file(file: &str, text: &str) -> Result<Vec<FctRecord>, FctParseError> {
    let mut out = Vec::new();
    for (n, line) in crate::text::content_lines(text) {
        let err = |kind| FctParseError {
            file: file.to_owned(),
            line: n,
            kind,
        };
        out.push(parse_fct_line(line).map_err(err)?);
    }
    Ok(out)
}

fn parse_fct_line(line: &str) -> Result<FctRecord, FctParseErrorKind> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let &[sip, dip, sport, dport, size, start, fct, ideal] = fields.as_slice() else {
        return Err(FctParseErrorKind::FieldCount(fields.len()));
    };
    let bad = |field, value: &str, expected| {
        FctParseErrorKind::BadField(crate::text::BadField::new(field, value, expected))
    };
    let ip = |field, v: &str| {
        u32::from_str_radix(v, 16)
            .ok()
            .filter(|_| v.len() <= 8)
            .map(NodeId::from_hpcc_ipv4)
            .ok_or_else(|| bad(field, v, "an IPv4 address in hex"))
    };
    let port = |field, v: &str| {
        v.parse::<u16>()
            .map_err(|_| bad(field, v, "a port 0-65535"))
    };
    let int = |field, v: &str| {
        v.parse::<u64>()
            .map_err(|_| bad(field, v, "a whole number"))
    };
    Ok(FctRecord {
        src: ip("sip", sip)?,
        dst: ip("dip", dip)?,
        sport: port("sport", sport)?,
        dport: port("dport", dport)?,
        size: int("size", size)?,
        start: Instant::from_nanos(int("start_ns", start)?),
        fct: Duration::from_nanos(int("fct_ns", fct)?),
        ideal: Duration::from_nanos(int("ideal_ns", ideal)?),
    })
}

#[cfg(test)]
mod tests;
