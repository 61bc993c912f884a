//! Where the lines of `roce dump` go ([`Printer`]): filtered, summed or printed, and counted
//! ([`Tally`]).

use std::io::{self, Write};

use roce_wire::frame::Frame;

use super::args::Args;
use super::filter::Filter;
use super::line::Line;
use super::summary::Summary;

/// What a dump found, for the summary and `--strict`.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) frames: usize,
    pub(super) roce: usize,
    pub(super) malformed_frames: usize,
    pub(super) malformed_roce: usize,
    pub(super) bad_icrc: usize,
    pub(super) snapped: usize,
    pub(super) gso_batches: usize,
    pub(super) gso_segments: usize,
    pub(super) printed: usize,
    pub(super) cut_short: bool,
}

impl Tally {
    pub(super) fn problems(&self) -> usize {
        self.malformed_frames + self.malformed_roce + self.bad_icrc + usize::from(self.cut_short)
    }
}

/// Where lines go, and what they added up to.
pub(super) struct Printer<'a, W: Write> {
    pub(super) args: &'a Args,
    pub(super) filter: Filter,
    /// With `--summary`: what the packets add up to, printed at the end instead of them.
    pub(super) summary: Option<Summary>,
    pub(super) out: W,
    pub(super) tally: Tally,
}

impl<W: Write> Printer<'_, W> {
    /// Whether `-c` has been reached.
    pub(super) fn done(&self) -> bool {
        self.args
            .count
            .is_some_and(|count| self.tally.printed >= count)
    }

    /// Counts a line, and prints it unless `-q` hides it.
    pub(super) fn show(&mut self, line: &Line<'_>) -> io::Result<()> {
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
    pub(super) fn write_summary(&mut self) -> io::Result<()> {
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
