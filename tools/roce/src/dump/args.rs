//! The command line of `roce dump`: its help, and the options it takes.

use std::path::PathBuf;

use roce_wire::{Opcode, Qpn};

use super::filter::{self, Filter};

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
    pub(super) file: PathBuf,
    /// Write one JSON object per packet (JSON Lines) instead of text. The segments of a GSO
    /// batch share their frame's number and carry `gso: {segment, segments, segment_size}`; a
    /// frame cut short by the capture has `cut_short: true`, `captured_len` and `frame_len`.
    #[arg(long)]
    pub(super) json: bool,
    /// Exit with status 1 if any frame is malformed, any RoCE packet fails to parse, any ICRC
    /// is bad, the file is cut short, or there is no RoCE packet at all.
    #[arg(long)]
    pub(super) strict: bool,
    /// Show only RoCE packets; skip other frames (TCP, ARP, ...).
    #[arg(short, long)]
    pub(super) quiet: bool,
    /// Do not check ICRCs (for captures taken behind something that rewrites packets).
    #[arg(long)]
    pub(super) no_icrc: bool,
    /// Stop after printing this many lines (after `-q` and the filters; each segment of a GSO
    /// batch is a line).
    #[arg(short = 'c', long, value_name = "N")]
    pub(super) count: Option<usize>,
    /// Only RoCE packets to this destination QP (the BTH's: a QP's requests go to its peer's
    /// QPN, its ACKs, NAKs, READ responses and CNPs come to its own). Hex (0x11, 0x000011) or
    /// decimal; repeat for several QPs.
    #[arg(short = 'Q', long = "qp", value_name = "QPN", value_parser = filter::parse_qpn)]
    pub(super) qps: Vec<Qpn>,
    /// Only RoCE packets of this opcode: its name as printed (RC_SEND_ONLY, RC_ACKNOWLEDGE, CNP;
    /// any case), its name without the transport (SEND_ONLY, ACKNOWLEDGE: every transport's), or
    /// its number (0x11). Repeat for several. NAKs are ACKNOWLEDGE packets.
    #[arg(short = 'o', long = "opcode", value_name = "NAME|NUM", value_parser = filter::parse_opcode)]
    pub(super) opcodes: Vec<Vec<Opcode>>,
    /// Only packets from or to this IP address (IPv4 or IPv6); repeat for several.
    #[arg(long = "host", value_name = "ADDR")]
    pub(super) hosts: Vec<std::net::IpAddr>,
    /// Print a per-QP summary instead of the packets (see above); with --json, one object per
    /// row. -c then stops after that many packets have been summed.
    #[arg(long)]
    pub(super) summary: bool,
}

impl Args {
    pub(super) fn filter(&self) -> Filter {
        Filter {
            qps: self.qps.clone(),
            opcodes: self.opcodes.iter().flatten().copied().collect(),
            hosts: self.hosts.clone(),
        }
    }
}
