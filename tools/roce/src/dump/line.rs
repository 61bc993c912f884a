//! One frame of a capture as `roce dump` shows it ([`Line`]): what is wrong with it, and its
//! line of text or JSON object; a GSO segment's place in its batch, a frame cut short.

use std::io::{self, Write};
use std::time::Duration;

use roce_wire::frame::{Frame, Transport};
use roce_wire::pretty::FrameLine;
use roce_wire::{Opcode, ParseError, Qpn, RocePacket, RoceRepr};
use serde_json::json;

use super::cm;
use crate::json;

/// A frame the capture's snap length cut short.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cut {
    /// Bytes captured.
    pub(super) captured: usize,
    /// Bytes the frame had.
    pub(super) orig_len: usize,
}

/// One frame of the capture, about to be printed.
pub(super) struct Line<'a> {
    pub(super) number: usize,
    pub(super) time: Duration,
    pub(super) frame: &'a Result<Frame<'a>, ParseError>,
    /// The bytes `frame` was parsed from (none for a GSO segment, which is whole).
    pub(super) bytes: Option<&'a [u8]>,
    /// Set when the capture cut the frame short.
    pub(super) cut: Option<Cut>,
    pub(super) check_icrc: bool,
    /// Which segment of a GSO batch this is.
    pub(super) gso: Option<Gso>,
}

/// A segment's place in its GSO batch.
#[derive(Debug, Clone, Copy)]
pub(super) struct Gso {
    /// From 1.
    pub(super) segment: usize,
    pub(super) segments: usize,
    /// The batch's segment size (UDP payload bytes).
    pub(super) size: usize,
}

impl std::fmt::Display for Gso {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, " gso {}/{}", self.segment, self.segments)
    }
}

/// What is wrong with a frame, if anything.
pub(super) struct Verdict {
    pub(super) is_roce: bool,
    /// The opcode and destination QP of the BTH, when it was captured.
    pub(super) bth: Option<(Opcode, Qpn)>,
    pub(super) roce: Option<RoceRepr>,
    /// HPCC's INT header, when the packet carries one and its headers were captured.
    int: Option<roce_wire::int::Repr>,
    pub(super) roce_error: Option<ParseError>,
    pub(super) bad_icrc: bool,
    icrc: Option<Result<(), ParseError>>,
}

impl Line<'_> {
    pub(super) fn verdict(&self) -> Verdict {
        let Ok(frame) = self.frame else {
            return Verdict {
                is_roce: false,
                bth: None,
                roce: None,
                int: None,
                roce_error: None,
                bad_icrc: false,
                icrc: None,
            };
        };
        let captured = self.roce_captured(frame);
        // The headers, and where they end; a packet with HPCC's INT header is read as the one
        // without it, the INT header counted among the headers.
        let parsed = frame.roce_payload().map(|payload| {
            if roce_wire::int::flagged(payload) {
                let mut rest = Vec::new();
                let int = roce_wire::int::strip(payload, &mut rest)?;
                let packet = RocePacket::new_checked(&rest[..])?;
                let end = packet.payload_offset() + roce_wire::int::HEADER_LEN;
                RoceRepr::parse(&packet).map(|repr| (end, repr, Some(int)))
            } else {
                let packet = RocePacket::new_checked(payload)?;
                RoceRepr::parse(&packet).map(|repr| (packet.payload_offset(), repr, None))
            }
        });
        // Of a packet cut short, only headers that were captured are believed.
        let headers_captured = match &parsed {
            Some(Ok((end, ..))) => captured >= *end,
            _ => false,
        };
        let bth = frame
            .roce_payload()
            .filter(|payload| payload.len() >= roce_wire::bth::HEADER_LEN)
            .filter(|_| captured >= roce_wire::bth::HEADER_LEN)
            .map(|payload| {
                let bth = roce_wire::bth::Packet::new_unchecked(payload);
                (bth.opcode(), bth.dest_qp())
            });
        let cut = self.cut.is_some();
        // A frame cut short by the capture's snap length cannot be judged.
        let icrc =
            (self.check_icrc && !cut && matches!(parsed, Some(Ok(_)))).then(|| frame.verify_icrc());
        let (roce, int) = match &parsed {
            Some(Ok((_, repr, int))) if headers_captured => (Some(*repr), *int),
            _ => (None, None),
        };
        Verdict {
            is_roce: parsed.is_some(),
            bth,
            roce,
            int,
            roce_error: parsed.and_then(|parsed| parsed.err()).filter(|_| !cut),
            bad_icrc: matches!(icrc, Some(Err(_))),
            icrc,
        }
    }

    /// How many bytes of the frame's RoCE packet were captured (all of a frame not cut short).
    fn roce_captured(&self, frame: &Frame<'_>) -> usize {
        let (Some(cut), Some(bytes), Some(payload)) = (self.cut, self.bytes, frame.roce_payload())
        else {
            return usize::MAX;
        };
        let at = offset_in(bytes, payload).unwrap_or(cut.orig_len);
        cut.captured.saturating_sub(at)
    }

    /// Whether the capture kept every header of the frame up to its transport's payload.
    fn headers_captured(&self, frame: &Frame<'_>) -> bool {
        let (Some(cut), Some(bytes)) = (self.cut, self.bytes) else {
            return true;
        };
        let end = match frame.transport {
            Some(Transport::Udp(_, payload)) => offset_in(bytes, payload),
            Some(Transport::Tcp { payload_len, .. }) => bytes.len().checked_sub(payload_len),
            // Where other headers end is not known here: an Ethernet header, and an IPv4 one
            // if the frame is IP, is the least they take.
            _ => Some(if frame.ip.is_some() { 34 } else { 14 }),
        };
        end.is_none_or(|end| cut.captured >= end)
    }

    pub(super) fn write_text(&self, out: &mut impl Write) -> io::Result<()> {
        let seconds = self.time.as_secs_f64();
        let gso = self.gso.map(|gso| gso.to_string()).unwrap_or_default();
        match (self.frame, self.cut) {
            (Ok(frame), None) if self.check_icrc => {
                writeln!(out, "{seconds:.6} {}{gso}", FrameLine::new(frame))
            }
            (Ok(frame), None) => {
                writeln!(out, "{seconds:.6} {}{gso}", FrameLine::without_icrc(frame))
            }
            (Ok(frame), Some(cut)) if self.headers_captured(frame) => {
                if frame.roce_payload().is_some() {
                    let captured = self.roce_captured(frame);
                    writeln!(
                        out,
                        "{seconds:.6} {}",
                        FrameLine::cut_short(frame, captured)
                    )
                } else {
                    writeln!(
                        out,
                        "{seconds:.6} {} (cut short by the capture: {} of {} bytes)",
                        FrameLine::without_icrc(frame),
                        cut.captured,
                        cut.orig_len
                    )
                }
            }
            (_, Some(cut)) => writeln!(
                out,
                "{seconds:.6} frame cut short by the capture before the end of its headers: {} of {} bytes",
                cut.captured, cut.orig_len
            ),
            (Err(err), None) => writeln!(out, "{seconds:.6} malformed frame: {err}"),
        }
    }

    pub(super) fn write_json(&self, out: &mut impl Write, verdict: &Verdict) -> io::Result<()> {
        let headers_captured = self
            .frame
            .as_ref()
            .is_ok_and(|frame| self.headers_captured(frame));
        let mut value = match (self.cut, headers_captured) {
            (Some(_), false) => json!({ "frame": self.number, "time": self.time.as_secs_f64() }),
            _ => json::frame(
                self.number,
                self.time,
                self.frame,
                verdict.roce.as_ref(),
                verdict.roce_error,
                verdict.icrc,
                self.cut.is_some(),
            ),
        };
        if let Some(cut) = self.cut {
            value["cut_short"] = json!(true);
            value["captured_len"] = json!(cut.captured);
            value["frame_len"] = json!(cut.orig_len);
        }
        let mad_captured = self.frame.as_ref().is_ok_and(|frame| {
            frame
                .roce_payload()
                .is_some_and(|payload| self.roce_captured(frame) >= payload.len())
        });
        if let Some(cm) = self
            .frame
            .as_ref()
            .ok()
            .filter(|_| mad_captured)
            .and_then(cm::of_frame)
        {
            value["cm"] = cm;
        }
        if let Some(int) = &verdict.int
            && let Some(pint) = int.pint
        {
            value["pint"] = json!({ "echo": int.echo, "value": pint });
        } else if let Some(int) = &verdict.int {
            let hops: Vec<_> = int
                .hops()
                .iter()
                .map(|hop| {
                    json!({
                        "qlen_bytes": hop.qlen_bytes(),
                        "line_rate_bps": hop.line_rate_bps(),
                    })
                })
                .collect();
            value["int"] = json!({ "echo": int.echo, "hops": hops });
        }
        if let Some(gso) = self.gso {
            value["gso"] = json!({
                "segment": gso.segment,
                "segments": gso.segments,
                "segment_size": gso.size,
            });
        }
        serde_json::to_writer(&mut *out, &value)?;
        out.write_all(b"\n")
    }
}

/// Where `inner`, a slice of `outer`, starts in it.
fn offset_in(outer: &[u8], inner: &[u8]) -> Option<usize> {
    let at = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    (at + inner.len() <= outer.len()).then_some(at)
}
