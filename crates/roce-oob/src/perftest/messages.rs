//! The messages of perftest's exchange, each as perftest writes it: the version (with this
//! crate's run parameters after its NUL), the system data, the MTU, the keys and the report.

use crate::text::{TextReader, TextWriter};
use crate::{OobError, escaped};

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
pub(super) fn decode_keys_in(
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
/// (0: all sizes, `-a`) in the low 28 bits of a 32-bit big-endian word whose top 4 bits are
/// the [`Modes`] (bit 31 `-b`, bit 30 `--run_infinitely`, bits 29–28 the connection: 0 RC,
/// 1 UC, 2 UD), the number of QPs (16 bits). A version longer than 4 bytes, or a message of
/// 2^28 bytes or more, leaves no room: no parameters then (the peer is not checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunParams {
    /// Iterations per QP, or the duration in seconds.
    pub amount: Amount,
    /// Bytes per message; `None` for all sizes (`-a`).
    pub size: Option<u32>,
    /// QPs (`-q`).
    pub qps: u16,
    /// The modes that both sides must share.
    pub modes: Modes,
}

/// The modes of a run that change what both sides do, so that both must be given them:
/// perftest's `-b`, `--run_infinitely` and `-c`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Modes {
    /// `-b`: both sides send.
    pub duplex: bool,
    /// `--run_infinitely`.
    pub run_infinitely: bool,
    /// `-c`.
    pub connection: Connection,
}

/// perftest's `-c`: the QPs' transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Connection {
    /// Reliable connected (perftest's default).
    #[default]
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

impl Connection {
    /// perftest's name (`-c RC|UC|UD`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Rc => "RC",
            Self::Uc => "UC",
            Self::Ud => "UD",
        }
    }
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
const SIZE_BITS: u32 = 0x0fff_ffff;
const DUPLEX_BIT: u32 = 0x8000_0000;
const INFINITE_BIT: u32 = 0x4000_0000;
const CONNECTION_SHIFT: u32 = 28;

impl RunParams {
    /// The 11 bytes; `None` when the size does not fit in its 28 bits.
    fn encode(&self) -> Option<[u8; RUN_PARAMS_LEN]> {
        let amount = match self.amount {
            Amount::Iterations(n) => n & !DURATION_BIT,
            Amount::Seconds(s) => DURATION_BIT | (s & !DURATION_BIT),
        };
        let size = self.size.unwrap_or(0);
        if size > SIZE_BITS {
            return None;
        }
        let connection = match self.modes.connection {
            Connection::Rc => 0,
            Connection::Uc => 1,
            Connection::Ud => 2,
        };
        let word = size
            | if self.modes.duplex { DUPLEX_BIT } else { 0 }
            | if self.modes.run_infinitely {
                INFINITE_BIT
            } else {
                0
            }
            | connection << CONNECTION_SHIFT;
        let mut out = [0u8; RUN_PARAMS_LEN];
        out[0] = RUN_PARAMS_MAGIC;
        out[1..5].copy_from_slice(&amount.to_be_bytes());
        out[5..9].copy_from_slice(&word.to_be_bytes());
        out[9..11].copy_from_slice(&self.qps.to_be_bytes());
        Some(out)
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
        let size_word = word(5..9);
        let size = size_word & SIZE_BITS;
        let connection = match (size_word >> CONNECTION_SHIFT) & 3 {
            0 => Connection::Rc,
            1 => Connection::Uc,
            2 => Connection::Ud,
            _ => return None,
        };
        Some(Self {
            amount: if amount & DURATION_BIT != 0 {
                Amount::Seconds(amount & !DURATION_BIT)
            } else {
                Amount::Iterations(amount)
            },
            size: (size != 0).then_some(size),
            qps: u16::from_be_bytes([tail[9], tail[10]]),
            modes: Modes {
                duplex: size_word & DUPLEX_BIT != 0,
                run_infinitely: size_word & INFINITE_BIT != 0,
                connection,
            },
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
    if let Some(params) = params.and_then(RunParams::encode)
        && tail + RUN_PARAMS_LEN <= VERSION_LEN
    {
        out[tail..tail + RUN_PARAMS_LEN].copy_from_slice(&params);
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
pub(super) fn atof(text: &str) -> f64 {
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

/// The name of the key handshakes' messages in errors.
pub(super) const KEYS: &str = "perftest keys";
