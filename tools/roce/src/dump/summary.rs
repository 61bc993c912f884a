//! `roce dump --summary`: one row per (source address, destination address, destination QP of
//! the BTH) — what a person debugging a capture asks first. A QP's requests are in one row; the
//! ACKs, NAKs and READ responses its peer sends back are in the row of the requester's QP, the
//! other way.
//!
//! Go-back-N shows as rewinds: an RC request whose PSN is not beyond the previous request's
//! starts one, and every request whose PSN is not beyond the highest seen is a retransmission.
//! A rewind to the PSN that a PSN sequence error NAK (or an RNR NAK) from the peer named is
//! "after a NAK" ("after an RNR NAK"); any other is "after a timeout" (or a NAK the capture did
//! not see).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::IpAddr;

use roce_wire::frame::{Ecn, Ip};
use roce_wire::opcode::Transport;
use roce_wire::{NakCode, Opcode, Psn, Qpn, RoceRepr, Syndrome};
use serde_json::{Value, json};

/// The rows of a summary, in the order their first packet came.
#[derive(Debug, Default)]
pub(super) struct Summary {
    rows: Vec<Row>,
    index: HashMap<Key, usize>,
    /// NAKs not yet followed by a rewind, by (requester, responder) address: the PSN each
    /// names, and its kind.
    pending: HashMap<(IpAddr, IpAddr), Vec<(Psn, Cause)>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    src: IpAddr,
    dst: IpAddr,
    qp: Qpn,
}

/// What one (source, destination, destination QP) carried.
#[derive(Debug)]
struct Row {
    key: Key,
    packets: u64,
    payload_bytes: u64,
    first_psn: Psn,
    last_psn: Psn,
    /// The last RC request's PSN, and the highest.
    last_request: Option<Psn>,
    highest_request: Option<Psn>,
    retransmitted: u64,
    rewinds: Listed<Rewind>,
    seq_naks: Listed<Psn>,
    rnr_naks: Listed<Psn>,
    other_naks: Listed<(NakCode, Psn)>,
    cnps: u64,
    ce: u64,
}

/// A go-back-N rewind: the requester went back to `to` when it had sent up to `from` (printed
/// `from->to`).
#[derive(Debug, Clone, Copy)]
struct Rewind {
    to: Psn,
    from: Psn,
    after: Cause,
}

/// What a rewind followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Nak,
    RnrNak,
    Timeout,
}

impl Cause {
    fn name(self) -> &'static str {
        match self {
            Self::Nak => "NAK",
            Self::RnrNak => "RNR NAK",
            Self::Timeout => "timeout",
        }
    }

    fn json(self) -> &'static str {
        match self {
            Self::Nak => "nak",
            Self::RnrNak => "rnr_nak",
            Self::Timeout => "timeout",
        }
    }
}

/// A count, and its first items (a capture may hold millions).
#[derive(Debug)]
struct Listed<T> {
    count: u64,
    items: Vec<T>,
}

impl<T> Default for Listed<T> {
    fn default() -> Self {
        Self {
            count: 0,
            items: Vec::new(),
        }
    }
}

impl<T> Listed<T> {
    fn push(&mut self, item: T) {
        self.count += 1;
        if self.items.len() < LISTED {
            self.items.push(item);
        }
    }

    /// The items, comma-separated, and how many more there were.
    fn text(&self, item: impl Fn(&T) -> String) -> String {
        let mut text: Vec<String> = self.items.iter().map(item).collect();
        let more = self.count - self.items.len() as u64;
        if more > 0 {
            text.push(format!("and {more} more"));
        }
        text.join(", ")
    }
}

impl Summary {
    /// Adds a RoCE packet sent from and to `ip`'s addresses.
    pub(super) fn add(&mut self, ip: &Ip, repr: &RoceRepr) {
        let bth = &repr.bth;
        let key = Key {
            src: ip.src,
            dst: ip.dst,
            qp: bth.dest_qp,
        };
        let at = *self.index.entry(key).or_insert_with(|| {
            self.rows.push(Row::new(key, bth.psn));
            self.rows.len() - 1
        });
        let row = &mut self.rows[at];
        row.packets += 1;
        row.payload_bytes += repr.payload_len as u64;
        row.last_psn = bth.psn;
        row.ce += u64::from(ip.ecn == Ecn::Ce);
        row.cnps += u64::from(bth.opcode == Opcode::Cnp);
        if let Some(aeth) = repr.aeth {
            // The responder (src) NAKs the requester (dst): its rewind goes dst > src.
            let pending = self.pending.entry((ip.dst, ip.src)).or_default();
            match aeth.syndrome {
                Syndrome::Nak(NakCode::PsnSeqErr) => {
                    row.seq_naks.push(bth.psn);
                    pending.push((bth.psn, Cause::Nak));
                }
                Syndrome::RnrNak { .. } => {
                    row.rnr_naks.push(bth.psn);
                    pending.push((bth.psn, Cause::RnrNak));
                }
                Syndrome::Nak(code) => row.other_naks.push((code, bth.psn)),
                Syndrome::Ack { .. } | Syndrome::Reserved(_) => {}
            }
        }
        let rc_request = bth
            .opcode
            .layout()
            .is_some_and(|layout| layout.transport == Transport::Rc && layout.is_request());
        if !rc_request {
            return;
        }
        let psn = bth.psn;
        if let (Some(last), Some(highest)) = (row.last_request, row.highest_request) {
            if psn.distance(highest) <= 0 {
                row.retransmitted += 1;
            }
            if psn.distance(last) <= 0 {
                let pending = self.pending.entry((ip.src, ip.dst)).or_default();
                let after = match pending.iter().position(|&(named, _)| named == psn) {
                    Some(i) => pending.remove(i).1,
                    None => Cause::Timeout,
                };
                row.rewinds.push(Rewind {
                    to: psn,
                    from: highest,
                    after,
                });
            }
        }
        row.last_request = Some(psn);
        if row.highest_request.is_none_or(|h| psn.distance(h) > 0) {
            row.highest_request = Some(psn);
        }
    }

    /// The table, a header line then a line per row, each followed by the PSNs its rewinds and
    /// NAKs name.
    pub(super) fn text(&self) -> String {
        let mut out = String::new();
        if self.rows.is_empty() {
            out.push_str("no RoCE packet to summarise\n");
            return out;
        }
        let header = [
            "src",
            "dst",
            "dest_qp",
            "packets",
            "bytes",
            "first_psn",
            "last_psn",
            "retrans",
            "rewinds",
            "seq_naks",
            "rnr_naks",
            "other_naks",
            "cnps",
            "ce",
        ];
        let cells: Vec<[String; 14]> = self.rows.iter().map(Row::cells).collect();
        let mut widths = header.map(str::len);
        for row in &cells {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.len());
            }
        }
        let line = |out: &mut String, cells: &[&str]| {
            let mut text = String::new();
            for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
                // Addresses to the left, numbers to the right.
                let _ = if i < 2 {
                    write!(text, "{cell:<width$}  ")
                } else {
                    write!(text, "{cell:>width$}  ")
                };
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&mut out, &header);
        for (row, cells) in self.rows.iter().zip(&cells) {
            line(&mut out, &cells.each_ref().map(String::as_str));
            row.details(&mut out);
        }
        out
    }

    /// One JSON object per row.
    pub(super) fn json(&self) -> impl Iterator<Item = Value> + '_ {
        self.rows.iter().map(Row::json)
    }
}

impl Row {
    fn new(key: Key, psn: Psn) -> Self {
        Self {
            key,
            packets: 0,
            payload_bytes: 0,
            first_psn: psn,
            last_psn: psn,
            last_request: None,
            highest_request: None,
            retransmitted: 0,
            rewinds: Listed::default(),
            seq_naks: Listed::default(),
            rnr_naks: Listed::default(),
            other_naks: Listed::default(),
            cnps: 0,
            ce: 0,
        }
    }

    fn cells(&self) -> [String; 14] {
        [
            self.key.src.to_string(),
            self.key.dst.to_string(),
            self.key.qp.to_string(),
            self.packets.to_string(),
            self.payload_bytes.to_string(),
            self.first_psn.to_string(),
            self.last_psn.to_string(),
            self.retransmitted.to_string(),
            self.rewinds.count.to_string(),
            self.seq_naks.count.to_string(),
            self.rnr_naks.count.to_string(),
            self.other_naks.count.to_string(),
            self.cnps.to_string(),
            self.ce.to_string(),
        ]
    }

    /// The lines under a row: where it went back to and why, and the PSNs its NAKs name.
    fn details(&self, out: &mut String) {
        if self.rewinds.count > 0 {
            let text = self
                .rewinds
                .text(|r| format!("{}->{} after a {}", r.from, r.to, r.after.name()));
            let _ = writeln!(out, "  go-back-N rewinds: {text}");
        }
        if self.seq_naks.count > 0 {
            let text = self.seq_naks.text(Psn::to_string);
            let _ = writeln!(out, "  PSN sequence error NAKs for psn {text}");
        }
        if self.rnr_naks.count > 0 {
            let text = self.rnr_naks.text(Psn::to_string);
            let _ = writeln!(out, "  RNR NAKs for psn {text}");
        }
        if self.other_naks.count > 0 {
            let text = self
                .other_naks
                .text(|(code, psn)| format!("{code} for psn {psn}"));
            let _ = writeln!(out, "  other NAKs: {text}");
        }
    }

    fn json(&self) -> Value {
        let psns = |list: &Listed<Psn>| -> Value {
            json!({
                "count": list.count,
                "psns": list.items.iter().map(|p| p.value()).collect::<Vec<_>>(),
            })
        };
        json!({
            "src": self.key.src.to_string(),
            "dst": self.key.dst.to_string(),
            "dest_qp": self.key.qp.value(),
            "packets": self.packets,
            "payload_bytes": self.payload_bytes,
            "first_psn": self.first_psn.value(),
            "last_psn": self.last_psn.value(),
            "retransmitted": self.retransmitted,
            "rewinds": {
                "count": self.rewinds.count,
                "list": self.rewinds.items.iter().map(|r| json!({
                    "to": r.to.value(),
                    "from": r.from.value(),
                    "after": r.after.json(),
                })).collect::<Vec<_>>(),
            },
            "seq_naks": psns(&self.seq_naks),
            "rnr_naks": psns(&self.rnr_naks),
            "other_naks": {
                "count": self.other_naks.count,
                "list": self.other_naks.items.iter().map(|(code, psn)| json!({
                    "code": code.to_string(),
                    "psn": psn.value(),
                })).collect::<Vec<_>>(),
            },
            "cnps": self.cnps,
            "ce": self.ce,
        })
    }
}

/// How many PSNs of each kind a row lists (the counts are complete).
const LISTED: usize = 16;

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use roce_wire::{AethRepr, BthRepr};

    use super::*;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    fn ip(src: IpAddr, dst: IpAddr) -> Ip {
        Ip {
            src,
            dst,
            dscp: 0,
            ecn: Ecn::Ect0,
            ttl: 64,
            identification: Some(0),
            dont_fragment: true,
            flow_label: None,
        }
    }

    fn packet(opcode: Opcode, qp: u32, psn: u32) -> RoceRepr {
        let mut bth = BthRepr::new(opcode, Qpn::new(qp), Psn::new(psn));
        bth.ack_req = true;
        let mut repr = RoceRepr::new(bth);
        repr.payload_len = 1024;
        repr
    }

    fn nak(qp: u32, psn: u32, syndrome: Syndrome) -> RoceRepr {
        let mut repr = packet(Opcode::RcAcknowledge, qp, psn);
        repr.payload_len = 0;
        repr.aeth = Some(AethRepr { syndrome, msn: 0 });
        repr
    }

    #[test]
    fn go_back_n_after_a_nak_and_after_a_timeout() {
        let mut summary = Summary::default();
        let send = |s: &mut Summary, psn| s.add(&ip(A, B), &packet(Opcode::RcSendOnly, 0x11, psn));
        // 0..=3 sent, 1 lost: B NAKs 1 and A goes back to it; then 3 is lost and A's timer
        // sends it again.
        for psn in 0..4 {
            send(&mut summary, psn);
        }
        summary.add(&ip(B, A), &nak(0x12, 1, Syndrome::Nak(NakCode::PsnSeqErr)));
        for psn in 1..4 {
            send(&mut summary, psn);
        }
        send(&mut summary, 3);
        let mut ce = ip(A, B);
        ce.ecn = Ecn::Ce;
        summary.add(&ce, &packet(Opcode::RcSendOnly, 0x11, 4));
        summary.add(&ip(B, A), &packet(Opcode::Cnp, 0x12, 0));

        let rows: Vec<Value> = summary.json().collect();
        assert_eq!(rows.len(), 2);
        let a = &rows[0];
        assert_eq!(
            (a["src"].as_str(), a["dest_qp"].as_u64()),
            (Some("10.0.0.1"), Some(0x11))
        );
        assert_eq!(a["packets"], 9);
        assert_eq!(a["payload_bytes"], 9 * 1024);
        assert_eq!(
            (a["first_psn"].as_u64(), a["last_psn"].as_u64()),
            (Some(0), Some(4))
        );
        assert_eq!(a["retransmitted"], 4, "1, 2, 3, then 3 again");
        assert_eq!(a["rewinds"]["count"], 2);
        assert_eq!(
            a["rewinds"]["list"],
            json!([
                {"to": 1, "from": 3, "after": "nak"},
                {"to": 3, "from": 3, "after": "timeout"},
            ])
        );
        assert_eq!(a["ce"], 1);
        let b = &rows[1];
        assert_eq!(b["seq_naks"], json!({"count": 1, "psns": [1]}));
        assert_eq!(b["cnps"], 1);
        assert_eq!(b["retransmitted"], 0, "responses are not requests");

        let text = summary.text();
        assert!(
            text.contains(
                "  go-back-N rewinds: 0x000003->0x000001 after a NAK, \
                 0x000003->0x000003 after a timeout\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("  PSN sequence error NAKs for psn 0x000001\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 5, "{text}");
    }

    #[test]
    fn rnr_naks_and_other_naks_are_told_apart() {
        let mut summary = Summary::default();
        summary.add(&ip(A, B), &packet(Opcode::RcSendOnly, 0x11, 7));
        summary.add(&ip(B, A), &nak(0x12, 7, Syndrome::from(0x20 | 14)));
        summary.add(&ip(A, B), &packet(Opcode::RcSendOnly, 0x11, 7));
        summary.add(
            &ip(B, A),
            &nak(0x12, 8, Syndrome::Nak(NakCode::RemoteAccessError)),
        );
        let rows: Vec<Value> = summary.json().collect();
        assert_eq!(rows[0]["rewinds"]["list"][0]["after"], "rnr_nak");
        assert_eq!(rows[1]["rnr_naks"], json!({"count": 1, "psns": [7]}));
        assert_eq!(
            rows[1]["other_naks"]["list"],
            json!([{"code": "REMOTE_ACCESS_ERROR", "psn": 8}])
        );
    }

    #[test]
    fn psns_wrap() {
        let mut summary = Summary::default();
        for psn in [0xff_fffe, 0xff_ffff, 0, 1, 0] {
            summary.add(&ip(A, B), &packet(Opcode::RcSendOnly, 0x11, psn));
        }
        let row = summary.json().next().unwrap();
        assert_eq!(row["retransmitted"], 1);
        assert_eq!(row["rewinds"]["list"][0]["from"], 1);
    }
}
