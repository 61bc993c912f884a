//! `roce dump`: one line per packet of a capture, like tcpdump, with the RoCEv2 headers decoded
//! and the ICRC checked; filters by QP, opcode and address; a per-QP summary.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use roce_pcap::{Capture, CaptureError};
use roce_wire::frame::{Frame, Transport};
use roce_wire::pretty::FrameLine;
use roce_wire::{Opcode, ParseError, Qpn, RoceRepr};
use serde_json::json;

use crate::json;

use self::filter::Filter;
use self::summary::Summary;

mod cm;
mod filter;
mod summary;

/// Print the packets of a capture, one line each, with RoCEv2 decoded and the ICRC checked.
///
/// Reads pcap or pcapng (Ethernet, Linux cooked capture v1 or v2, or raw IP), such as
/// `tcpdump -i IFACE -w FILE udp port 4791` writes, from a file or (FILE `-`) from standard
/// input. RoCEv2 is recognised on UDP destination port 4791. Each RoCE line shows: time since the
/// first packet, addresses and UDP ports, the opcode, destination QP, PSN and BTH flags, the key
/// fields of the extension headers (RETH va/rkey/len, AETH syndrome/MSN, immediate data, atomic
/// operands, DETH Q_Key), the payload length and `icrc=ok` or `icrc=BAD`. A UD SEND to QP 1
/// carries a MAD: a connection manager message is shown after the transport part in one line
/// (`CM REQ tid=… lcid=… sid=0x0000000001061c06 (RDMA TCP port 7174) qpn=… psn=… mtu=1024 …`,
/// `CM REJ … reason=8 (invalid service ID)`), and `--json` gives it as a `cm` object.
///
/// A capture taken on `lo`, or on a veth with segmentation offload on, holds UDP GSO batches:
/// one datagram of up to 64 KiB carrying many RoCE packets of one size (the last maybe shorter),
/// which the kernel cuts before they leave. Such a frame is shown as the datagrams the kernel
/// sends, one line each ending in `gso I/N`, each with its own IPv4 ID (the batch's plus I-1)
/// and lengths, and each ICRC checked against its own. The segment size is the smallest for
/// which every piece parses as a RoCE packet and every piece's ICRC verifies (or, for a batch
/// damaged in one place, the first or second piece's).
///
/// A packet that the capture's snap length cut short (`tcpdump -s`, `roce ... --snaplen`) is
/// decoded as far as it was captured: its line ends `icrc=unchecked (cut short by the capture:
/// N of M bytes)`; it is counted, never reported as a bad ICRC nor as malformed.
///
/// Filters (-Q, -o, --host) choose the packets printed, given as JSON or summed by --summary;
/// an option given more than once matches any of its values, and different options must all
/// match. -Q and -o match RoCE packets only.
///
/// --summary prints, instead of the packets, one row per source address, destination address and
/// destination QP of the BTH: packets, payload bytes, first and last PSN, RC requests sent again
/// (retrans: a PSN not beyond the highest one seen), go-back-N rewinds (a request PSN not beyond
/// the previous one), NAKs by kind (PSN sequence error, RNR, other) with the PSNs they name, CNPs,
/// and packets marked ECN CE; under a row, where each rewind went and whether it followed a NAK,
/// an RNR NAK or a timeout (no NAK for that PSN in the capture), and the NAKs' PSNs. A QP's
/// requests are in its peer's QP's row (the destination QP), the ACKs and NAKs it receives in its
/// own. With --json, one JSON object per row.
///
/// A line of counts goes to standard error (every frame read, whatever the filters). Exit
/// status: 0, or 1 when `--strict` found a problem, or 2 when the file could not be read. A file
/// cut short in the middle of a packet (a capture still being written) is read up to there;
/// `--strict` counts that as a problem.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    roce dump pcap-fixtures/rxe/mtu1500-rc_s64_m1024.pcap\n  \
    roce dump --strict -q capture.pcapng     # RoCE only; fail on any malformed packet or bad ICRC\n  \
    roce dump --summary capture.pcap         # per QP: packets, retransmissions, NAKs, CNPs, CE\n  \
    roce dump -Q 0x11 -o ACKNOWLEDGE capture.pcap   # the ACKs and NAKs sent to QP 0x11\n  \
    roce dump --host 10.0.0.2 -o CNP capture.pcap   # CNPs from or to 10.0.0.2\n  \
    tcpdump -i lo -U -w - udp port 4791 | roce dump -q -\n  \
    roce dump --json capture.pcap | jq 'select(.roce.opcode == \"RC_ACKNOWLEDGE\")'\n  \
    roce dump --json capture.pcap | jq 'select(.cm.message == \"REJ\") | .cm.reason_text'")]
pub(crate) struct Args {
    /// The capture file (pcap or pcapng); `-` reads standard input.
    file: PathBuf,
    /// Write one JSON object per packet (JSON Lines) instead of text. The segments of a GSO
    /// batch share their frame's number and carry `gso: {segment, segments, segment_size}`; a
    /// frame cut short by the capture has `cut_short: true`, `captured_len` and `frame_len`.
    #[arg(long)]
    json: bool,
    /// Exit with status 1 if any frame is malformed, any RoCE packet fails to parse, any ICRC
    /// is bad, the file is cut short, or there is no RoCE packet at all.
    #[arg(long)]
    strict: bool,
    /// Show only RoCE packets; skip other frames (TCP, ARP, ...).
    #[arg(short, long)]
    quiet: bool,
    /// Do not check ICRCs (for captures taken behind something that rewrites packets).
    #[arg(long)]
    no_icrc: bool,
    /// Stop after printing this many lines (after `-q` and the filters; each segment of a GSO
    /// batch is a line).
    #[arg(short = 'c', long, value_name = "N")]
    count: Option<usize>,
    /// Only RoCE packets to this destination QP (the BTH's: a QP's requests go to its peer's
    /// QPN, its ACKs, NAKs, READ responses and CNPs come to its own). Hex (0x11, 0x000011) or
    /// decimal; repeat for several QPs.
    #[arg(short = 'Q', long = "qp", value_name = "QPN", value_parser = filter::parse_qpn)]
    qps: Vec<Qpn>,
    /// Only RoCE packets of this opcode: its name as printed (RC_SEND_ONLY, RC_ACKNOWLEDGE, CNP;
    /// any case), its name without the transport (SEND_ONLY, ACKNOWLEDGE: every transport's), or
    /// its number (0x11). Repeat for several. NAKs are ACKNOWLEDGE packets.
    #[arg(short = 'o', long = "opcode", value_name = "NAME|NUM", value_parser = filter::parse_opcode)]
    opcodes: Vec<Vec<Opcode>>,
    /// Only packets from or to this IP address (IPv4 or IPv6); repeat for several.
    #[arg(long = "host", value_name = "ADDR")]
    hosts: Vec<std::net::IpAddr>,
    /// Print a per-QP summary instead of the packets (see above); with --json, one object per
    /// row. -c then stops after that many packets have been summed.
    #[arg(long)]
    summary: bool,
}

impl Args {
    fn filter(&self) -> Filter {
        Filter {
            qps: self.qps.clone(),
            opcodes: self.opcodes.iter().flatten().copied().collect(),
            hosts: self.hosts.clone(),
        }
    }
}

/// What a dump found, for the summary and `--strict`.
#[derive(Debug, Default)]
struct Tally {
    frames: usize,
    roce: usize,
    malformed_frames: usize,
    malformed_roce: usize,
    bad_icrc: usize,
    snapped: usize,
    gso_batches: usize,
    gso_segments: usize,
    printed: usize,
    cut_short: bool,
}

/// A frame the capture's snap length cut short.
#[derive(Debug, Clone, Copy)]
struct Cut {
    /// Bytes captured.
    captured: usize,
    /// Bytes the frame had.
    orig_len: usize,
}

impl Tally {
    fn problems(&self) -> usize {
        self.malformed_frames + self.malformed_roce + self.bad_icrc + usize::from(self.cut_short)
    }
}

/// Runs `roce dump`.
pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let stdin = args.file.as_os_str() == "-";
    let name = if stdin {
        "standard input".to_owned()
    } else {
        args.file.display().to_string()
    };
    let input: Box<dyn Read> = if stdin {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(&args.file).with_context(|| format!("cannot read {name}"))?)
    };
    let capture = Capture::from_stream(input).with_context(|| format!("cannot read {name}"))?;
    let mut printer = Printer {
        args,
        filter: args.filter(),
        summary: args.summary.then(Summary::default),
        out: BufWriter::new(io::stdout().lock()),
        tally: Tally::default(),
    };
    let mut start = None;
    for (index, captured) in capture.enumerate() {
        if printer.done() {
            break;
        }
        let captured = match captured {
            Ok(captured) => captured,
            Err(CaptureError::Truncated) => {
                printer.tally.cut_short = true;
                break;
            }
            Err(err) => {
                return Err(err).with_context(|| format!("{name}: frame {}", index + 1));
            }
        };
        let time = captured
            .time
            .saturating_sub(*start.get_or_insert(captured.time));
        let orig_len = captured.orig_len as usize;
        let cut = (captured.data.len() < orig_len).then_some(Cut {
            captured: captured.data.len(),
            orig_len,
        });
        printer.tally.frames += 1;
        printer.tally.snapped += usize::from(cut.is_some());
        let bytes = made_whole(&captured.data, cut);
        let frame = Frame::parse(captured.link, &bytes);
        // A frame cut short by the snap length is not cut into segments: its last ones are gone.
        let batch = match &frame {
            Ok(frame) if cut.is_none() => frame.gso_segments(),
            _ => None,
        };
        let shown = match batch {
            Some(segments) => {
                printer.tally.gso_batches += 1;
                printer.tally.gso_segments += segments.count();
                let mut shown = Ok(());
                for (i, segment) in segments.iter().enumerate() {
                    let segment = Ok(segment);
                    let line = Line {
                        number: index + 1,
                        time,
                        frame: &segment,
                        bytes: None,
                        cut: None,
                        check_icrc: !args.no_icrc,
                        gso: Some(Gso {
                            segment: i + 1,
                            segments: segments.count(),
                            size: segments.segment_size(),
                        }),
                    };
                    shown = printer.show(&line);
                    if shown.is_err() || printer.done() {
                        break;
                    }
                }
                shown
            }
            None => printer.show(&Line {
                number: index + 1,
                time,
                frame: &frame,
                bytes: Some(&bytes),
                cut,
                check_icrc: !args.no_icrc,
                gso: None,
            }),
        };
        if let Err(err) = shown {
            return quiet_on_broken_pipe(err);
        }
    }
    if let Err(err) = printer.write_summary() {
        return quiet_on_broken_pipe(err);
    }
    if let Err(err) = printer.out.flush() {
        return quiet_on_broken_pipe(err);
    }
    let tally = &printer.tally;
    eprintln!(
        "roce dump: {} frames, {} RoCE: {} malformed frames, {} malformed RoCE packets, {} bad ICRCs{}{}{}{}",
        tally.frames,
        tally.roce,
        tally.malformed_frames,
        tally.malformed_roce,
        if args.no_icrc {
            "unchecked".to_owned()
        } else {
            tally.bad_icrc.to_string()
        },
        if tally.snapped > 0 {
            format!(
                ", {} cut short by the capture (ICRC not checked)",
                tally.snapped
            )
        } else {
            String::new()
        },
        if tally.gso_batches > 0 {
            format!(
                ", {} GSO batches of {} segments in all",
                tally.gso_batches, tally.gso_segments
            )
        } else {
            String::new()
        },
        if printer.filter.is_active() {
            format!("; {} matched the filter", tally.printed)
        } else {
            String::new()
        },
        if tally.cut_short {
            "; the file is cut short in the middle of a packet"
        } else {
            ""
        },
    );
    if args.strict && tally.problems() > 0 {
        eprintln!("roce dump: --strict: {} problems", tally.problems());
        return Ok(ExitCode::from(1));
    }
    if args.strict && tally.roce == 0 && !printer.done() {
        let hint = if tally.snapped > 0 {
            "; or was its snap length too short to see the UDP header?"
        } else {
            ""
        };
        eprintln!(
            "roce dump: --strict: no RoCE packet in {name} (RoCEv2 is UDP to port 4791; was the capture filtered?{hint})"
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// A frame cut short by the snap length with the missing bytes as zeros, so that its headers
/// parse with their lengths (what is shown of it is then only what was captured); any other
/// frame as it is. An original length beyond any frame's is not believed.
fn made_whole(data: &[u8], cut: Option<Cut>) -> Cow<'_, [u8]> {
    match cut {
        Some(cut) if cut.orig_len <= MAX_FRAME_LEN => {
            let mut whole = data.to_vec();
            whole.resize(cut.orig_len, 0);
            Cow::Owned(whole)
        }
        _ => Cow::Borrowed(data),
    }
}

/// The longest frame believed: a 64 KiB GSO batch and its headers, and then some (tcpdump's
/// largest snap length).
const MAX_FRAME_LEN: usize = 262_144;

/// Where lines go, and what they added up to.
struct Printer<'a, W: Write> {
    args: &'a Args,
    filter: Filter,
    /// With `--summary`: what the packets add up to, printed at the end instead of them.
    summary: Option<Summary>,
    out: W,
    tally: Tally,
}

impl<W: Write> Printer<'_, W> {
    /// Whether `-c` has been reached.
    fn done(&self) -> bool {
        self.args
            .count
            .is_some_and(|count| self.tally.printed >= count)
    }

    /// Counts a line, and prints it unless `-q` hides it.
    fn show(&mut self, line: &Line<'_>) -> io::Result<()> {
        let verdict = line.verdict();
        let tally = &mut self.tally;
        tally.roce += usize::from(verdict.is_roce);
        // A frame cut short is not malformed for missing its end.
        tally.malformed_frames += usize::from(line.frame.is_err() && line.cut.is_none());
        tally.malformed_roce += usize::from(verdict.roce_error.is_some());
        tally.bad_icrc += usize::from(verdict.bad_icrc);
        if self.args.quiet && !verdict.is_roce && line.frame.is_ok() {
            return Ok(());
        }
        if !self.filter.matches(line.frame.as_ref().ok(), verdict.bth) {
            return Ok(());
        }
        tally.printed += 1;
        if let Some(summary) = &mut self.summary {
            if let (Ok(Frame { ip: Some(ip), .. }), Some(repr)) = (line.frame, &verdict.roce) {
                summary.add(ip, repr);
            }
            return Ok(());
        }
        if self.args.json {
            line.write_json(&mut self.out, &verdict)
        } else {
            line.write_text(&mut self.out)
        }
    }
}

impl<W: Write> Printer<'_, W> {
    /// Prints the summary, if asked for.
    fn write_summary(&mut self) -> io::Result<()> {
        let Some(summary) = &self.summary else {
            return Ok(());
        };
        if self.args.json {
            for row in summary.json() {
                serde_json::to_writer(&mut self.out, &row)?;
                self.out.write_all(b"\n")?;
            }
            Ok(())
        } else {
            self.out.write_all(summary.text().as_bytes())
        }
    }
}

/// `roce dump | head` closes the pipe early: that is not an error.
fn quiet_on_broken_pipe(err: io::Error) -> anyhow::Result<ExitCode> {
    if err.kind() == io::ErrorKind::BrokenPipe {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(err.into())
    }
}

/// One frame of the capture, about to be printed.
struct Line<'a> {
    number: usize,
    time: Duration,
    frame: &'a Result<Frame<'a>, ParseError>,
    /// The bytes `frame` was parsed from (none for a GSO segment, which is whole).
    bytes: Option<&'a [u8]>,
    /// Set when the capture cut the frame short.
    cut: Option<Cut>,
    check_icrc: bool,
    /// Which segment of a GSO batch this is.
    gso: Option<Gso>,
}

/// A segment's place in its GSO batch.
#[derive(Debug, Clone, Copy)]
struct Gso {
    /// From 1.
    segment: usize,
    segments: usize,
    /// The batch's segment size (UDP payload bytes).
    size: usize,
}

impl std::fmt::Display for Gso {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, " gso {}/{}", self.segment, self.segments)
    }
}

/// What is wrong with a frame, if anything.
struct Verdict {
    is_roce: bool,
    /// The opcode and destination QP of the BTH, when it was captured.
    bth: Option<(Opcode, Qpn)>,
    roce: Option<RoceRepr>,
    roce_error: Option<ParseError>,
    bad_icrc: bool,
    icrc: Option<Result<(), ParseError>>,
}

impl Line<'_> {
    fn verdict(&self) -> Verdict {
        let Ok(frame) = self.frame else {
            return Verdict {
                is_roce: false,
                bth: None,
                roce: None,
                roce_error: None,
                bad_icrc: false,
                icrc: None,
            };
        };
        let captured = self.roce_captured(frame);
        let parsed = frame
            .roce()
            .map(|packet| packet.and_then(|p| RoceRepr::parse(&p).map(|repr| (p, repr))));
        // Of a packet cut short, only headers that were captured are believed.
        let headers_captured = match &parsed {
            Some(Ok((packet, _))) => captured >= packet.payload_offset(),
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
        Verdict {
            is_roce: parsed.is_some(),
            bth,
            roce: parsed
                .and_then(Result::ok)
                .filter(|_| headers_captured)
                .map(|(_, repr)| repr),
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

    fn write_text(&self, out: &mut impl Write) -> io::Result<()> {
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

    fn write_json(&self, out: &mut impl Write, verdict: &Verdict) -> io::Result<()> {
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
