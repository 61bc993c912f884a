//! perftest's out-of-band exchange over TCP ("Ethernet" exchange, no `-R`), as perftest
//! 4.5-0.17 (Debian 12's package; upstream tag `v4.5-0.17`, commit e63987c4, whose
//! `configure.ac` says version 6.06) runs it. Function names below are those of
//! `src/perftest_communication.c` at that tag; the order of the steps is that of the tools'
//! `main` functions (`write_bw.c`, `send_bw.c`, `read_bw.c`, `atomic_bw.c`, `*_lat.c`).
//!
//! Every step is one `ctx_xchg_data` or `ctx_hand_shake`: **the client writes then reads, the
//! server reads then writes**, each message whole.
//!
//! 1. `exchange_versions`: 16 bytes, the version string NUL-padded (`"6.06"`);
//!    `check_version_compatibility` then refuses a peer older than 5.70;
//! 2. `check_sys_data`: the cycle buffer (page size) and the cache line size, each a 4-byte
//!    big-endian int in its own exchange; both sides keep the larger of each;
//! 3. `check_mtu`: the port's `ibv_mtu` enum as `sprintf("%d")`, 2 bytes (`"3\0"` for 1024);
//!    both use the smaller;
//! 4. key handshakes (`ctx_hand_shake`, `ethernet_write_keys` / `ethernet_read_keys`): a
//!    59-byte text without GID or 108 bytes with one (`-x`), see [`encode_keys`]. How many and
//!    where the QP is connected depends on the test, see [`Test`];
//! 5. the end: after a bandwidth test, a handshake, the report (`xchg_bw_reports`, five 8-byte
//!    big-endian values); then `ctx_close_connection`: one more handshake and `"done\0"`, which
//!    each side writes and then closes without reading the other's.
//!
//! [`Session`] runs these steps in order for one QP (or N, `-q N`) and stops where the tool
//! connects its QPs and where it starts its traffic; the free functions are the single steps.

use tokio::io::{AsyncRead, AsyncWrite};

use crate::io::{read_msg, write_msg};
use crate::text::{TextReader, TextWriter};
use crate::{DONE, OobError, escaped};

/// The version string perftest 4.5-0.17 announces (`VERSION` from `configure.ac`'s
/// `AC_INIT([perftest],[6.06])`), not the package version.
pub const VERSION: &str = "6.06";
/// The length of the version message (`MAX_VERSION`).
pub const VERSION_LEN: usize = 16;
/// The oldest peer version perftest 4.5-0.17 talks to (`check_version_compatibility`).
pub const MIN_PEER_VERSION: f64 = 5.70;
/// The key message without GID, its NUL included (`KEY_MSG_SIZE`).
pub const KEY_MSG_SIZE: usize = 59;
/// The key message with GID, its NUL included (`KEY_MSG_SIZE_GID`).
pub const KEY_MSG_SIZE_GID: usize = 108;
/// The length of the MTU message (`sizeof(char[2])` for peers from 5.31 on).
pub const MTU_MSG_LEN: usize = 2;
/// The most QPs a test may run (`-q`): perftest_parameters.h's `MAX_QP_NUM`, which `-q`
/// checks with `CHECK_VALUE_IN_RANGE(..., MIN_QP_NUM, MAX_QP_NUM, ...)`.
pub const MAX_QPS: usize = 16384;

const KEYS: &str = "perftest keys";
/// The handshakes after connect, which only synchronise the two sides.
const SYNC: &str = "sync before the test (a perftest handshake)";
/// The handshakes of the end of the test.
const END: &str = "end-of-test sync (a perftest handshake)";

/// Which end of the TCP connection this is (`servername` given or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Connects; writes first in every step.
    Client,
    /// Accepts; reads first in every step.
    Server,
}

/// One QP's keys as perftest sends them (`struct pingpong_dest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PerftestDest {
    /// The port's LID (0 on RoCE).
    pub lid: u16,
    /// Outstanding RDMA reads/atomics: the device's `max_qp_rd_atom` for read and atomic
    /// tests (rxe: 0x80), 1 otherwise. The peer uses **this side's** value as its QP's
    /// `max_rd_atomic` without clamping it (`ctx_modify_qp_to_rts`; perftest issue #114).
    pub out_reads: u16,
    /// The QP number; 24 bits, higher bits are not sent.
    pub qpn: u32,
    /// The first PSN (`lrand48() & 0xffffff`); 24 bits, higher bits are not sent.
    pub psn: u32,
    /// The R_Key of the test buffer (0 is seen for send tests on rxe).
    pub rkey: u32,
    /// The remote address the peer writes to or reads from.
    pub vaddr: u64,
    /// The GID at the `-x` index, in wire order; `None` without `-x`, which selects the
    /// 59-byte message. Both sides must agree: each reads the length its own `-x` implies.
    pub gid: Option<[u8; 16]>,
    /// The SRQ number (XRC and DC only; 0 otherwise).
    pub srqn: u32,
}

/// The key message for `dest`: `"%04x:%04x:%06x:%06x:%08x:%016llx:%08x"` and a NUL
/// ([`KEY_MSG_SIZE`] bytes) without GID; with one, the 16 GID bytes as `"%02x:"` each between
/// the vaddr and the SRQN, and a `':'` after the SRQN ([`KEY_MSG_SIZE_GID`] bytes). QPN and PSN
/// are 24-bit; bits above are dropped.
pub fn encode_keys(dest: &PerftestDest) -> Vec<u8> {
    let len = if dest.gid.is_some() {
        KEY_MSG_SIZE_GID
    } else {
        KEY_MSG_SIZE
    };
    let mut out = vec![0u8; len];
    let mut w = TextWriter::new(&mut out);
    w.hex(u64::from(dest.lid), 4)
        .byte(b':')
        .hex(u64::from(dest.out_reads), 4)
        .byte(b':')
        .hex(u64::from(dest.qpn & 0xff_ffff), 6)
        .byte(b':')
        .hex(u64::from(dest.psn & 0xff_ffff), 6)
        .byte(b':')
        .hex(u64::from(dest.rkey), 8)
        .byte(b':')
        .hex(dest.vaddr, 16)
        .byte(b':');
    match dest.gid {
        Some(gid) => {
            for byte in gid {
                w.hex(u64::from(byte), 2).byte(b':');
            }
            w.hex(u64::from(dest.srqn), 8).byte(b':');
        }
        None => {
            w.hex(u64::from(dest.srqn), 8);
        }
    }
    w.byte(0);
    out
}

/// Parses a key message, with GID ([`KEY_MSG_SIZE_GID`] bytes) or without
/// ([`KEY_MSG_SIZE`] bytes) as `with_gid` says: every field exactly its width in hex digits,
/// every `':'` and the NUL in place. (perftest reads it with `sscanf` / `strtol`, more
/// loosely; what it writes is always in this form.)
pub fn decode_keys(msg: &[u8], with_gid: bool) -> Result<PerftestDest, OobError> {
    decode_keys_in(msg, with_gid, KEYS)
}

/// [`decode_keys`], with errors that name `message` (the step the keys came in).
fn decode_keys_in(
    msg: &[u8],
    with_gid: bool,
    message: &'static str,
) -> Result<PerftestDest, OobError> {
    let expected = if with_gid {
        KEY_MSG_SIZE_GID
    } else {
        KEY_MSG_SIZE
    };
    if msg.len() != expected {
        return Err(OobError::Length {
            message,
            expected,
            got: msg.len(),
        });
    }
    let mut r = TextReader::new(msg, message);
    let lid = r.hex_colon("LID", 4)?;
    let out_reads = r.hex_colon("OUT_READS", 4)?;
    let qpn = r.hex_colon("QPN", 6)?;
    let psn = r.hex_colon("PSN", 6)?;
    let rkey = r.hex_colon("RKEY", 8)?;
    let vaddr = r.hex_colon("VADDR", 16)?;
    let gid = if with_gid {
        let mut gid = [0u8; 16];
        for byte in &mut gid {
            *byte = r.hex("GID", 2)? as u8;
            r.delim(b':', "GID byte")?;
        }
        Some(gid)
    } else {
        None
    };
    let srqn = r.hex("SRQN", 8)?;
    if with_gid {
        r.delim(b':', "SRQN")?;
    }
    r.delim(0, "SRQN")?;
    Ok(PerftestDest {
        lid: lid as u16,
        out_reads: out_reads as u16,
        qpn: qpn as u32,
        psn: psn as u32,
        rkey: rkey as u32,
        vaddr,
        gid,
        srqn: srqn as u32,
    })
}

/// The parameters of a run that a roce-emu peer announces after the NUL of its version message,
/// where perftest reads nothing: it `atof`s the string and ignores the rest of the 16 bytes,
/// which its own `strncpy` into a zeroed buffer leaves all NUL. So two `roce perf`s can see
/// that they were given different `-n`, `-s`, `-q` or `-D` before any traffic, as perftest
/// from 6.28 on does with `negotiate_params` (perftest_communication.c), which announcing
/// 6.06 keeps off.
///
/// The 11 bytes after `"6.06\0"`: [`RUN_PARAMS_MAGIC`], the iterations per QP as a 32-bit
/// big-endian number (or, top bit set, the duration in seconds of `-D`), the message size
/// (0: all sizes, `-a`), the number of QPs (16 bits). A version longer than 4 bytes leaves no
/// room: no parameters then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunParams {
    /// Iterations per QP, or the duration in seconds.
    pub amount: Amount,
    /// Bytes per message; `None` for all sizes (`-a`).
    pub size: Option<u32>,
    /// QPs (`-q`).
    pub qps: u16,
}

/// How long a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Amount {
    /// `-n`: iterations per QP (at most 2^31 - 1).
    Iterations(u32),
    /// `-D`: seconds (at most 2^31 - 1).
    Seconds(u32),
}

/// The byte after the version's NUL that says [`RunParams`] follow (perftest sends a NUL
/// there).
pub const RUN_PARAMS_MAGIC: u8 = b'R';

const RUN_PARAMS_LEN: usize = 11;
const DURATION_BIT: u32 = 0x8000_0000;

impl RunParams {
    fn encode(&self) -> [u8; RUN_PARAMS_LEN] {
        let amount = match self.amount {
            Amount::Iterations(n) => n & !DURATION_BIT,
            Amount::Seconds(s) => DURATION_BIT | (s & !DURATION_BIT),
        };
        let mut out = [0u8; RUN_PARAMS_LEN];
        out[0] = RUN_PARAMS_MAGIC;
        out[1..5].copy_from_slice(&amount.to_be_bytes());
        out[5..9].copy_from_slice(&self.size.unwrap_or(0).to_be_bytes());
        out[9..11].copy_from_slice(&self.qps.to_be_bytes());
        out
    }

    fn decode(tail: &[u8]) -> Option<Self> {
        let tail: &[u8; RUN_PARAMS_LEN] = tail.get(..RUN_PARAMS_LEN)?.try_into().ok()?;
        if tail[0] != RUN_PARAMS_MAGIC {
            return None;
        }
        let word = |r: std::ops::Range<usize>| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&tail[r]);
            u32::from_be_bytes(b)
        };
        let amount = word(1..5);
        let size = word(5..9);
        Some(Self {
            amount: if amount & DURATION_BIT != 0 {
                Amount::Seconds(amount & !DURATION_BIT)
            } else {
                Amount::Iterations(amount)
            },
            size: (size != 0).then_some(size),
            qps: u16::from_be_bytes([tail[9], tail[10]]),
        })
    }
}

/// The 16-byte version message with `params` after the NUL when they fit (a version of at
/// most 4 bytes; see [`RunParams`]).
pub fn encode_version_with(
    version: &str,
    params: Option<&RunParams>,
) -> Result<[u8; VERSION_LEN], OobError> {
    let mut out = encode_version(version)?;
    let tail = version.len() + 1;
    if let Some(params) = params
        && tail + RUN_PARAMS_LEN <= VERSION_LEN
    {
        out[tail..tail + RUN_PARAMS_LEN].copy_from_slice(&params.encode());
    }
    Ok(out)
}

/// The 16-byte version message: `version` and NUL padding (`strncpy` into a zeroed
/// `char[16]`). At most 15 bytes, no NUL inside.
pub fn encode_version(version: &str) -> Result<[u8; VERSION_LEN], OobError> {
    let bytes = version.as_bytes();
    let reason = if bytes.len() >= VERSION_LEN {
        Some("longer than 15 bytes")
    } else if bytes.contains(&0) {
        Some("contains a NUL")
    } else {
        None
    };
    if let Some(reason) = reason {
        return Err(OobError::Version {
            text: escaped(bytes),
            reason,
        });
    }
    let mut out = [0u8; VERSION_LEN];
    out[..bytes.len()].copy_from_slice(bytes);
    Ok(out)
}

/// The version a peer announced.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerVersion {
    /// The text before the first NUL.
    pub text: String,
    /// Its value as C's `atof` reads it (the leading decimal number; 0 if none), which is what
    /// perftest compares against its feature thresholds.
    pub number: f64,
    /// What a roce-emu peer announced after the NUL; `None` from perftest.
    pub params: Option<RunParams>,
}

/// Parses a 16-byte version message: printable ASCII up to a NUL, which must be inside the 16
/// bytes (perftest would read past the buffer otherwise). Bytes after the NUL are ignored, as
/// perftest ignores them.
pub fn decode_version(msg: &[u8]) -> Result<PeerVersion, OobError> {
    if msg.len() != VERSION_LEN {
        return Err(OobError::Length {
            message: "perftest version",
            expected: VERSION_LEN,
            got: msg.len(),
        });
    }
    let Some(nul) = msg.iter().position(|&b| b == 0) else {
        return Err(OobError::Version {
            text: escaped(msg),
            reason: "no NUL in 16 bytes",
        });
    };
    let text = &msg[..nul];
    if !text.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        return Err(OobError::Version {
            text: escaped(text),
            reason: "not printable ASCII",
        });
    }
    let text: String = text.iter().map(|&b| char::from(b)).collect();
    let number = atof(&text);
    let params = RunParams::decode(&msg[nul + 1..]);
    Ok(PeerVersion {
        text,
        number,
        params,
    })
}

/// C `atof` for the decimal forms a version string has: leading blanks, an optional sign,
/// digits, an optional fraction; anything after is ignored; no number gives 0.
fn atof(text: &str) -> f64 {
    let s = text.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let bytes = s.as_bytes();
    let mut end = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        end = 1;
    }
    let int_start = end;
    while bytes.get(end).is_some_and(u8::is_ascii_digit) {
        end += 1;
    }
    let mut digits = end - int_start;
    if bytes.get(end) == Some(&b'.') {
        let frac_start = end + 1;
        let mut frac_end = frac_start;
        while bytes.get(frac_end).is_some_and(u8::is_ascii_digit) {
            frac_end += 1;
        }
        if digits > 0 || frac_end > frac_start {
            digits += frac_end - frac_start;
            end = frac_end;
        }
    }
    if digits == 0 {
        return 0.0;
    }
    s.get(..end).and_then(|n| n.parse().ok()).unwrap_or(0.0)
}

/// `ibv_mtu`: the path MTU enum whose value perftest sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum IbvMtu {
    /// 256 bytes (`IBV_MTU_256` = 1).
    Mtu256 = 1,
    /// 512 bytes (2).
    Mtu512 = 2,
    /// 1024 bytes (3); rxe's active MTU on a 1500-byte netdev.
    Mtu1024 = 3,
    /// 2048 bytes (4).
    Mtu2048 = 4,
    /// 4096 bytes (5).
    Mtu4096 = 5,
}

impl IbvMtu {
    /// The enum for its value 1..=5.
    pub fn from_enum(value: u8) -> Option<Self> {
        Some(match value {
            1 => Self::Mtu256,
            2 => Self::Mtu512,
            3 => Self::Mtu1024,
            4 => Self::Mtu2048,
            5 => Self::Mtu4096,
            _ => return None,
        })
    }

    /// The enum for an MTU in bytes (256, 512, ... 4096).
    pub fn from_bytes(bytes: u32) -> Option<Self> {
        Some(match bytes {
            256 => Self::Mtu256,
            512 => Self::Mtu512,
            1024 => Self::Mtu1024,
            2048 => Self::Mtu2048,
            4096 => Self::Mtu4096,
            _ => return None,
        })
    }

    /// The MTU in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u8)
    }
}

/// The 2-byte MTU message: the enum value as one decimal digit and a NUL.
pub fn encode_mtu(mtu: IbvMtu) -> [u8; MTU_MSG_LEN] {
    [b'0' + mtu as u8, 0]
}

/// Parses the 2-byte MTU message: a digit 1..=5 and a NUL. (perftest `strtol`s it and falls
/// back to its own MTU when the value is out of range; a peer sending that is broken, so this
/// is an error here.)
pub fn decode_mtu(msg: &[u8]) -> Result<IbvMtu, OobError> {
    match msg {
        [digit @ b'1'..=b'5', 0] => {
            IbvMtu::from_enum(digit - b'0').ok_or(OobError::Mtu([*digit, 0]))
        }
        [a, b] => Err(OobError::Mtu([*a, *b])),
        _ => Err(OobError::Length {
            message: "perftest MTU",
            expected: MTU_MSG_LEN,
            got: msg.len(),
        }),
    }
}

/// The system data of `check_sys_data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SysData {
    /// The cycle buffer (`sysconf(_SC_PAGESIZE)`, 4096): the spacing of test buffers, which
    /// decides the vaddr perftest announces.
    pub cycle_buffer: u32,
    /// The cache line size (64 on x86).
    pub cache_line_size: u32,
}

impl Default for SysData {
    /// 4096 and 64, as perftest on x86-64 Linux sends them.
    fn default() -> Self {
        Self {
            cycle_buffer: 4096,
            cache_line_size: 64,
        }
    }
}

impl SysData {
    /// What both sides use afterwards: the larger of each value.
    pub fn merge(self, other: Self) -> Self {
        Self {
            cycle_buffer: self.cycle_buffer.max(other.cycle_buffer),
            cache_line_size: self.cache_line_size.max(other.cache_line_size),
        }
    }
}

/// A bandwidth report as `xchg_bw_reports` sends it (without `--report-per-port`): five 8-byte
/// big-endian values, each its own exchange. Only the client's is meaningful in a one-way
/// test: perftest's server sends whatever is in its uninitialised report struct.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BwReport {
    /// Message size in bytes.
    pub size: u64,
    /// Iterations.
    pub iters: u64,
    /// Peak bandwidth (in the unit of `--report_gbits` / MB/s as the reporter chose).
    pub bw_peak: f64,
    /// Average bandwidth, same unit.
    pub bw_avg: f64,
    /// Average message rate, Mpps.
    pub msg_rate_avg: f64,
}

impl BwReport {
    /// The five 8-byte messages, in the order they are exchanged.
    pub fn encode(&self) -> [[u8; 8]; 5] {
        [
            self.size.to_be_bytes(),
            self.iters.to_be_bytes(),
            self.bw_peak.to_bits().to_be_bytes(),
            self.bw_avg.to_bits().to_be_bytes(),
            self.msg_rate_avg.to_bits().to_be_bytes(),
        ]
    }

    /// The report from its five 8-byte messages (any bits are a report).
    pub fn decode(parts: &[[u8; 8]; 5]) -> Self {
        let [size, iters, peak, avg, rate] = parts.map(u64::from_be_bytes);
        Self {
            size,
            iters,
            bw_peak: f64::from_bits(peak),
            bw_avg: f64::from_bits(avg),
            msg_rate_avg: f64::from_bits(rate),
        }
    }
}

/// The RDMA operation a perftest tool measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `ib_send_bw`, `ib_send_lat`.
    Send,
    /// `ib_write_bw`, `ib_write_lat`.
    Write,
    /// `ib_read_bw`, `ib_read_lat`.
    Read,
    /// `ib_atomic_bw`, `ib_atomic_lat`.
    Atomic,
}

/// Bandwidth or latency tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `ib_*_bw`.
    Bandwidth,
    /// `ib_*_lat`.
    Latency,
}

/// Which perftest tool runs, which fixes the number and places of the key handshakes. For
/// one QP, not bidirectional (`-b`), one message size (no `-a`), from the tools' `main`s at
/// v4.5-0.17 (with `-q N` see below):
///
/// | tool | before connect | after connect (last = ready) | end |
/// |---|---|---|---|
/// | write/read/atomic bw | 1 | 2 | handshake, report, handshake, done |
/// | send bw | 1 | 3 (the last after posting receives) | handshake, done |
/// | write lat | 2 | 2 | nothing |
/// | read/atomic lat | 2 | 2 | handshake, done |
/// | send lat | 1 | 3 (the last after posting receives) | handshake, done |
///
/// With `-q N` (bandwidth tests only) the per-QP handshake becomes N, one per QP in QP order,
/// each message in the one-QP format with that QP's keys, before connect and again after
/// (`write_bw.c`, `send_bw.c`, `read_bw.c`, `atomic_bw.c`: `for (i=0; i < num_of_qps; i++)
/// ctx_hand_shake(&user_comm,&my_dest[i],&rem_dest[i])`); every other handshake is QP 0's.
/// So write/read/atomic bw: N before connect, N + 1 after; send bw: N before, 1 + N + 1 after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Test {
    /// The operation.
    pub verb: Verb,
    /// Bandwidth or latency.
    pub kind: Kind,
}

impl Test {
    /// `ib_write_bw`.
    pub const WRITE_BW: Self = Self::new(Verb::Write, Kind::Bandwidth);
    /// `ib_send_bw`.
    pub const SEND_BW: Self = Self::new(Verb::Send, Kind::Bandwidth);
    /// `ib_read_bw`.
    pub const READ_BW: Self = Self::new(Verb::Read, Kind::Bandwidth);
    /// `ib_atomic_bw`.
    pub const ATOMIC_BW: Self = Self::new(Verb::Atomic, Kind::Bandwidth);
    /// `ib_write_lat`.
    pub const WRITE_LAT: Self = Self::new(Verb::Write, Kind::Latency);
    /// `ib_send_lat`.
    pub const SEND_LAT: Self = Self::new(Verb::Send, Kind::Latency);
    /// `ib_read_lat`.
    pub const READ_LAT: Self = Self::new(Verb::Read, Kind::Latency);
    /// `ib_atomic_lat`.
    pub const ATOMIC_LAT: Self = Self::new(Verb::Atomic, Kind::Latency);

    /// The test of `verb` and `kind`.
    pub const fn new(verb: Verb, kind: Kind) -> Self {
        Self { verb, kind }
    }

    /// Key handshakes before the QP is connected: the latency tools other than send do an
    /// extra one (`ctx_hand_shake(my_dest)` before the per-QP loop).
    pub fn handshakes_before_connect(self) -> usize {
        match (self.kind, self.verb) {
            (Kind::Latency, Verb::Write | Verb::Read | Verb::Atomic) => 2,
            _ => 1,
        }
    }

    /// Key handshakes after the QP is connected and before traffic, the last being the
    /// "ready" sync: send tests do one on QP 0, the per-QP one, and one after posting their
    /// receives; the others the per-QP one and "an additional handshake ... after moving qp
    /// to RTR".
    pub fn handshakes_after_connect(self) -> usize {
        match self.verb {
            Verb::Send => 3,
            _ => 2,
        }
    }

    /// Whether the end has the report exchange: one-way write, read and atomic bandwidth tests
    /// (a handshake, the report, then the close).
    pub fn exchanges_report(self) -> bool {
        self.kind == Kind::Bandwidth && self.verb != Verb::Send
    }

    /// Whether the end has `ctx_close_connection` (a handshake and `"done"`): all but
    /// `ib_write_lat`, which just exits.
    pub fn closes_with_done(self) -> bool {
        self != Self::WRITE_LAT
    }
}

/// One `ctx_xchg_data`: the client writes `mine` then reads `theirs`, the server the other way
/// round.
async fn xchg<S>(
    stream: &mut S,
    side: Side,
    mine: &[u8],
    theirs: &mut [u8],
    message: &'static str,
) -> Result<(), OobError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    match side {
        Side::Client => {
            write_msg(stream, mine, message).await?;
            read_msg(stream, theirs, message).await
        }
        Side::Server => {
            read_msg(stream, theirs, message).await?;
            write_msg(stream, mine, message).await
        }
    }
}

/// `exchange_versions` + `check_version_compatibility`: sends `version`, returns the peer's,
/// [`OobError::VersionTooOld`] if it is before 5.70.
pub async fn exchange_versions<S>(
    stream: &mut S,
    side: Side,
    version: &str,
) -> Result<PeerVersion, OobError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    exchange_versions_with(stream, side, version, None).await
}

/// [`exchange_versions`], announcing `params` after the version's NUL ([`RunParams`]).
pub async fn exchange_versions_with<S>(
    stream: &mut S,
    side: Side,
    version: &str,
    params: Option<&RunParams>,
) -> Result<PeerVersion, OobError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let mine = encode_version_with(version, params)?;
    let mut theirs = [0u8; VERSION_LEN];
    xchg(stream, side, &mine, &mut theirs, "perftest version").await?;
    let peer = decode_version(&theirs)?;
    if peer.number < MIN_PEER_VERSION {
        return Err(OobError::VersionTooOld(peer.text));
    }
    Ok(peer)
}

/// `check_sys_data` (peers from 5.32 on): the cycle buffer, then the cache line size, each a
/// 4-byte big-endian int in its own exchange. Returns the peer's values; both sides go on with
/// [`SysData::merge`].
pub async fn exchange_sys_data<S>(
    stream: &mut S,
    side: Side,
    mine: SysData,
) -> Result<SysData, OobError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let mut cycle = [0u8; 4];
    xchg(
        stream,
        side,
        &mine.cycle_buffer.to_be_bytes(),
        &mut cycle,
        "perftest cycle buffer",
    )
    .await?;
    let mut line = [0u8; 4];
    xchg(
        stream,
        side,
        &mine.cache_line_size.to_be_bytes(),
        &mut line,
        "perftest cache line size",
    )
    .await?;
    Ok(SysData {
        cycle_buffer: u32::from_be_bytes(cycle),
        cache_line_size: u32::from_be_bytes(line),
    })
}

/// `check_mtu` (peers from 5.31 on send 2 bytes): returns the peer's MTU; both sides use the
/// smaller.
pub async fn exchange_mtu<S>(stream: &mut S, side: Side, mine: IbvMtu) -> Result<IbvMtu, OobError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let mut theirs = [0u8; MTU_MSG_LEN];
    xchg(stream, side, &encode_mtu(mine), &mut theirs, "perftest MTU").await?;
    decode_mtu(&theirs)
}

/// One `ctx_hand_shake`: sends `local`'s keys, returns the peer's. The length read is the one
/// `local.gid` implies (perftest copies its own `gid_index` to the remote's before reading).
pub async fn hand_shake<S>(
    stream: &mut S,
    side: Side,
    local: &PerftestDest,
) -> Result<PerftestDest, OobError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    hand_shake_as(stream, side, local, KEYS).await
}

/// [`hand_shake`] with errors that name `message`, the step it is part of.
async fn hand_shake_as<S>(
    stream: &mut S,
    side: Side,
    local: &PerftestDest,
    message: &'static str,
) -> Result<PerftestDest, OobError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let mine = encode_keys(local);
    let with_gid = local.gid.is_some();
    let mut theirs = vec![
        0u8;
        if with_gid {
            KEY_MSG_SIZE_GID
        } else {
            KEY_MSG_SIZE
        }
    ];
    xchg(stream, side, &mine, &mut theirs, message).await?;
    decode_keys_in(&theirs, with_gid, message)
}

/// `xchg_bw_reports` (peers from 5.33 on, without `--report-per-port`): the five values, each
/// its own exchange. Returns the peer's.
pub async fn exchange_bw_reports<S>(
    stream: &mut S,
    side: Side,
    mine: &BwReport,
) -> Result<BwReport, OobError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let mut theirs = [[0u8; 8]; 5];
    for (mine, theirs) in mine.encode().iter().zip(theirs.iter_mut()) {
        xchg(stream, side, mine, theirs, "perftest report").await?;
    }
    Ok(BwReport::decode(&theirs))
}

/// What the peer did at the end of `ctx_close_connection`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerDone {
    /// It sent `"done\0"`.
    Done,
    /// The stream ended (or was reset) before any byte of it. perftest writes `"done"` and
    /// closes without reading the other side's, so a close can race with ours.
    Closed,
}

/// `ctx_close_connection`: a handshake, then `"done\0"`. perftest then closes; this also reads
/// the peer's `"done\0"` (anything else is [`OobError::NotDone`]) so the caller knows the peer
/// got to the end.
pub async fn close_connection<S>(
    stream: &mut S,
    side: Side,
    local: &PerftestDest,
) -> Result<(PerftestDest, PeerDone), OobError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let remote = hand_shake_as(stream, side, local, END).await?;
    write_msg(stream, &DONE, "closing \"done\"").await?;
    let mut buf = [0u8; DONE.len()];
    match read_msg(stream, &mut buf, "closing \"done\"").await {
        Ok(()) if buf == DONE => Ok((remote, PeerDone::Done)),
        Ok(()) => Err(OobError::NotDone(escaped(&buf))),
        Err(OobError::Closed { got: 0, .. }) => Ok((remote, PeerDone::Closed)),
        Err(OobError::Io { source, .. })
            if matches!(
                source.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
            ) =>
        {
            Ok((remote, PeerDone::Closed))
        }
        Err(e) => Err(e),
    }
}

/// What this side announces in the first three steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The version string; [`VERSION`] by default. A peer from 6.28 on negotiates more
    /// parameters (`negotiate_params`) only with a peer that announces 6.28 or later, so
    /// announcing 6.06 keeps newer perftests on this exchange.
    pub version: String,
    /// The system data; [`SysData::default`].
    pub sys: SysData,
    /// The local port's active MTU (perftest sends that unless `-m` is given).
    pub mtu: IbvMtu,
    /// This run's parameters, announced after the version's NUL ([`RunParams`]); `None`
    /// sends the NUL padding perftest sends.
    pub params: Option<RunParams>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            version: VERSION.to_owned(),
            sys: SysData::default(),
            mtu: IbvMtu::Mtu1024,
            params: None,
        }
    }
}

/// Whether a test may run `qps` QPs: 1..=[`MAX_QPS`], and only 1 in a latency test
/// (perftest_parameters.c, `case 'q'`: "Multiple QPs only available on bw tests").
pub fn check_qps(test: Test, qps: usize) -> Result<(), OobError> {
    let reason = if qps == 0 {
        "at least one QP"
    } else if qps > MAX_QPS {
        "at most 16384 QPs (perftest's MAX_QP_NUM)"
    } else if qps > 1 && test.kind == Kind::Latency {
        "several QPs only in bandwidth tests, as perftest"
    } else {
        return Ok(());
    };
    Err(OobError::QpCount { qps, reason })
}

/// How the end went ([`Session::finish`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finish {
    /// The peer's keys from the closing handshakes (`None` for `ib_write_lat`).
    pub remote: Option<PerftestDest>,
    /// The peer's report, for the tests that exchange one.
    pub remote_report: Option<BwReport>,
    /// Whether the peer's `"done"` arrived (`None` for `ib_write_lat`, which has no close).
    pub peer_done: Option<PeerDone>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Started,
    Keyed,
    Connected,
    Ready,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Self::Started => "start",
            Self::Keyed => "exchange_keys",
            Self::Connected => "connected",
            Self::Ready => "ready",
        }
    }
}

/// One side of one perftest connection (one QP, or N with [`Session::exchange_qp_keys`]),
/// driven step by step by the caller:
///
/// 1. [`Session::start`]: versions, system data, MTU. Create the QP and buffers now: the
///    vaddr depends on the merged cycle buffer, the path MTU is [`Session::mtu`];
/// 2. [`Session::exchange_keys`] (or [`Session::exchange_qp_keys`]): the handshakes before
///    connect; returns the peer's keys. Move the QP(s) to RTR/RTS with them;
/// 3. [`Session::connected`]: the handshakes after connect but the last. Post receives now
///    (send tests);
/// 4. [`Session::ready`]: the last sync; traffic starts when it returns (perftest's server of
///    a one-way write/read/atomic test sends nothing and goes on to step 5 at once);
/// 5. [`Session::finish`]: the end, when this side's part of the test is over.
#[derive(Debug)]
pub struct Session<S> {
    stream: S,
    side: Side,
    test: Test,
    peer_version: PeerVersion,
    remote_sys: SysData,
    sys: SysData,
    remote_mtu: IbvMtu,
    mtu: IbvMtu,
    /// One entry per QP, QP 0 first (perftest's `my_dest` array).
    local: Vec<PerftestDest>,
    stage: Stage,
}

impl<S> Session<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    /// Runs the version, system data and MTU exchanges on a connected stream.
    pub async fn start(
        mut stream: S,
        side: Side,
        test: Test,
        config: &Config,
    ) -> Result<Self, OobError> {
        let peer_version =
            exchange_versions_with(&mut stream, side, &config.version, config.params.as_ref())
                .await?;
        let remote_sys = exchange_sys_data(&mut stream, side, config.sys).await?;
        let remote_mtu = exchange_mtu(&mut stream, side, config.mtu).await?;
        Ok(Self {
            stream,
            side,
            test,
            peer_version,
            remote_sys,
            sys: config.sys.merge(remote_sys),
            remote_mtu,
            mtu: config.mtu.min(remote_mtu),
            local: vec![PerftestDest::default()],
            stage: Stage::Started,
        })
    }

    /// This side.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The test.
    pub fn test(&self) -> Test {
        self.test
    }

    /// The peer's version.
    pub fn peer_version(&self) -> &PeerVersion {
        &self.peer_version
    }

    /// The peer's system data.
    pub fn remote_sys_data(&self) -> SysData {
        self.remote_sys
    }

    /// The system data both sides use (the larger of each value).
    pub fn sys_data(&self) -> SysData {
        self.sys
    }

    /// The peer's MTU.
    pub fn remote_mtu(&self) -> IbvMtu {
        self.remote_mtu
    }

    /// The path MTU both sides use (the smaller).
    pub fn mtu(&self) -> IbvMtu {
        self.mtu
    }

    /// The stream, for whatever the caller does after (or instead of) [`Session::finish`].
    pub fn into_inner(self) -> S {
        self.stream
    }

    fn step(&mut self, called: &'static str, from: Stage, to: Stage) -> Result<(), OobError> {
        if self.stage == from {
            self.stage = to;
            Ok(())
        } else {
            Err(OobError::Sequence {
                called,
                after: self.stage.name(),
            })
        }
    }

    /// `count` handshakes, each sending QP `qp`'s keys; returns the peer's keys from the last.
    async fn hand_shakes(
        &mut self,
        qp: usize,
        count: usize,
        message: &'static str,
    ) -> Result<PerftestDest, OobError> {
        let mut remote = PerftestDest::default();
        for _ in 0..count {
            remote = hand_shake_as(&mut self.stream, self.side, &self.local[qp], message).await?;
        }
        Ok(remote)
    }

    /// One handshake per QP, in QP order (the tools' `for (i=0; i < num_of_qps; i++)
    /// ctx_hand_shake(&my_dest[i], &rem_dest[i])` loops); returns the peer's keys in that order.
    async fn hand_shake_each_qp(
        &mut self,
        message: &'static str,
    ) -> Result<Vec<PerftestDest>, OobError> {
        let mut remote = Vec::with_capacity(self.local.len());
        for qp in 0..self.local.len() {
            remote
                .push(hand_shake_as(&mut self.stream, self.side, &self.local[qp], message).await?);
        }
        Ok(remote)
    }

    /// The key handshakes before connect ([`Test::handshakes_before_connect`]) for one QP,
    /// sending `local` (also in every later handshake). Returns the peer's keys; connect the QP
    /// to them before [`Session::connected`].
    pub async fn exchange_keys(&mut self, local: PerftestDest) -> Result<PerftestDest, OobError> {
        let mut remote = self.exchange_qp_keys(vec![local]).await?;
        Ok(remote.pop().expect("one QP, one key message"))
    }

    /// The key handshakes before connect for `local.len()` QPs (`-q N`, bandwidth tests only):
    /// the latency tools' extra handshake with QP 0, then one per QP in order, each in the
    /// single-QP message format. Returns the peer's keys, QP `i`'s at `i`; connect QP `i` to
    /// them before [`Session::connected`]. Later handshakes that name no QP send QP 0's keys,
    /// as perftest's `ctx_hand_shake(&my_dest[0], ...)` calls do. Both sides must have the same
    /// number of QPs: the protocol does not carry it.
    ///
    /// One entry is exactly [`Session::exchange_keys`]. [`OobError::QpCount`] when there is no
    /// entry, more than [`MAX_QPS`], or more than one in a latency test (perftest:
    /// "Multiple QPs only available on bw tests").
    pub async fn exchange_qp_keys(
        &mut self,
        local: Vec<PerftestDest>,
    ) -> Result<Vec<PerftestDest>, OobError> {
        check_qps(self.test, local.len())?;
        self.step("exchange_keys", Stage::Started, Stage::Keyed)?;
        self.local = local;
        // Only the latency tools have more than the per-QP loop before connect.
        let extra = self.test.handshakes_before_connect() - 1;
        self.hand_shakes(0, extra, KEYS).await?;
        self.hand_shake_each_qp(KEYS).await
    }

    /// The handshakes after connect but the last; returns the peer's keys from the last one.
    /// Send tests first do one with QP 0; then every test does one per QP.
    pub async fn connected(&mut self) -> Result<PerftestDest, OobError> {
        self.step("connected", Stage::Keyed, Stage::Connected)?;
        // handshakes_after_connect counts, for one QP, the per-QP one and "ready": whatever is
        // left comes before the per-QP loop (send_bw.c: the handshake right after ctx_connect).
        let before_loop = self.test.handshakes_after_connect() - 2;
        self.hand_shakes(0, before_loop, SYNC).await?;
        let mut remote = self.hand_shake_each_qp(SYNC).await?;
        Ok(remote.pop().expect("at least one QP"))
    }

    /// The last handshake before traffic (after posting receives, for send tests), with QP 0's
    /// keys; returns the peer's keys.
    pub async fn ready(&mut self) -> Result<PerftestDest, OobError> {
        self.step("ready", Stage::Connected, Stage::Ready)?;
        self.hand_shakes(0, 1, SYNC).await
    }

    /// One more handshake with QP 0 while the test runs, after [`Session::ready`]: what
    /// `ib_send_bw -a` does before and after each message size (send_bw.c, `RUN_ALL`: a
    /// handshake after posting the size's receives, and one after its run). Returns the
    /// peer's keys.
    pub async fn sync(&mut self) -> Result<PerftestDest, OobError> {
        self.step("sync", Stage::Ready, Stage::Ready)?;
        self.hand_shakes(0, 1, SYNC).await
    }

    /// The end of the test, as [`Test`] says: for one-way write/read/atomic bandwidth tests a
    /// handshake and the report exchange (`report` is this side's; a perftest server sends
    /// garbage there), then for all but `ib_write_lat` [`close_connection`]. The stream is
    /// dropped (closed) afterwards.
    pub async fn finish(mut self, report: &BwReport) -> Result<Finish, OobError> {
        self.step("finish", Stage::Ready, Stage::Ready)?;
        let mut finish = Finish {
            remote: None,
            remote_report: None,
            peer_done: None,
        };
        if self.test.exchanges_report() {
            finish.remote = Some(self.hand_shakes(0, 1, END).await?);
            finish.remote_report =
                Some(exchange_bw_reports(&mut self.stream, self.side, report).await?);
        }
        if self.test.closes_with_done() {
            let (remote, done) =
                close_connection(&mut self.stream, self.side, &self.local[0]).await?;
            finish.remote = Some(remote);
            finish.peer_done = Some(done);
        }
        Ok(finish)
    }
}

#[cfg(test)]
mod tests;
