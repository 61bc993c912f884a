//! `roce dump`: one line per packet of a capture, like tcpdump, with the RoCEv2 headers decoded
//! and the ICRC checked; filters by QP, opcode and address; a per-QP summary.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::process::ExitCode;

use anyhow::Context;
use roce_pcap::{Capture, CaptureError};
use roce_wire::frame::Frame;

use self::line::{Cut, Gso, Line};
use self::printer::{Printer, Tally};
use self::summary::Summary;

mod args;
mod cm;
mod filter;
mod line;
mod printer;
mod summary;

pub(crate) use self::args::Args;

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

/// `roce dump | head` closes the pipe early: that is not an error.
fn quiet_on_broken_pipe(err: io::Error) -> anyhow::Result<ExitCode> {
    if err.kind() == io::ErrorKind::BrokenPipe {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(err.into())
    }
}
