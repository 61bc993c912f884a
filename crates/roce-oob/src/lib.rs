//! The out-of-band connection exchanges that RDMA test tools run over TCP before (and after)
//! their RDMA traffic, so that roce-emu can stand in for either side of them:
//!
//! * [`pingpong`]: `ibv_rc_pingpong` (and `ibv_ud_pingpong`, same format) from rdma-core 44,
//!   one 52-byte text message each way and a closing `"done"`;
//! * [`perftest`]: perftest 4.5-0.17 (`ib_write_bw`, `ib_send_bw`, `ib_read_bw`, the `_lat`
//!   tools) over TCP, or with `-R` over a CM-connected RC QP ([`perftest::Exchange`]): a
//!   version string, system data, the MTU, then repeated key handshakes
//!   around the test and, after a bandwidth test, the report and `"done"`.
//!
//! Each module has the sans-IO formats (`encode` / `decode` with typed errors; nothing from the
//! network can panic) and thin async functions over any `AsyncRead + AsyncWrite` stream
//! (a `tokio::net::TcpStream` in practice). The functions stop where the real tools move their
//! QP to RTR/RTS, so the caller can connect its own QP at the same point of the conversation.
//!
//! Every message is written with a single write: both tools read each message with one
//! `read()` call and fail if it comes back short.
//!
//! `docs/oob.md` walks through both exchanges byte by byte and says what was checked against
//! the tools' source and what against captures of real traffic.

#![warn(missing_docs)]

use std::error::Error as StdError;

pub mod perftest;
pub mod pingpong;

mod io;

pub use io::Stream;
mod text;

/// What the unit tests of both exchanges share.
#[cfg(test)]
mod testing {
    /// The GID both tools send for 198.18.0.`last`: its IPv4-mapped IPv6 address.
    pub(crate) fn v4_gid(last: u8) -> [u8; 16] {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[198, 18, 0, last]);
        gid
    }
}

/// The TCP port both tools use by default (`-p` / `--port` changes it): rc_pingpong.c's `port`
/// in `main`, perftest_parameters.h's `DEF_PORT`.
pub const DEFAULT_PORT: u16 = 18515;

/// The 5 bytes both tools send to say they are finished: `"done"` with its NUL
/// (`write(fd, "done", sizeof "done")`).
pub const DONE: [u8; 5] = *b"done\0";

/// Why an out-of-band exchange failed.
///
/// `message` fields name the message being read or written (for example
/// `"ibv_rc_pingpong address"`, `"perftest keys"`); `field` names the field inside it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OobError {
    /// A message does not have the length its format has.
    #[error("{message}: {got} bytes, expected {expected}")]
    Length {
        /// The message.
        message: &'static str,
        /// Its length in the format.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A field is not exactly `width` hexadecimal digits.
    #[error("{message}: {field} (bytes {offset}..) is \"{text}\", expected {width} hex digits")]
    Hex {
        /// The message.
        message: &'static str,
        /// The field.
        field: &'static str,
        /// Where the field starts in the message.
        offset: usize,
        /// How many digits the format has there.
        width: usize,
        /// What was there instead (escaped).
        text: String,
    },
    /// A separator or terminator is not where the format has it.
    #[error("{message}: byte {offset} after {after} is {found:#04x}, expected {expected:?}")]
    Delimiter {
        /// The message.
        message: &'static str,
        /// What comes just before the delimiter.
        after: &'static str,
        /// The delimiter's position.
        offset: usize,
        /// The byte the format has there (`':'` or the NUL).
        expected: char,
        /// The byte found.
        found: u8,
    },
    /// perftest's 16-byte version string is not usable.
    #[error("perftest version {text:?}: {reason}")]
    Version {
        /// The bytes before the first NUL (escaped), or all 16.
        text: String,
        /// What is wrong with them.
        reason: &'static str,
    },
    /// The peer's perftest is older than 5.70, which perftest 4.5-0.17 refuses to talk to
    /// (`check_version_compatibility`).
    #[error("the peer announced perftest version {0:?}; versions before 5.70 are refused")]
    VersionTooOld(String),
    /// The 2-byte MTU message is not an `ibv_mtu` digit 1..=5 and a NUL.
    #[error("perftest MTU message {0:02x?}: expected an ibv_mtu digit 1-5 and a NUL")]
    Mtu([u8; 2]),
    /// The closing message is not `"done\0"`.
    #[error("expected \"done\\0\", got \"{0}\"")]
    NotDone(String),
    /// The peer closed the connection in the middle of (or before) a message.
    #[error("the peer closed the connection after {got} of the {expected} bytes of the {message}")]
    Closed {
        /// The message being read.
        message: &'static str,
        /// Bytes read before the end of the stream.
        got: usize,
        /// The message's length.
        expected: usize,
    },
    /// Reading or writing the stream failed.
    #[error("{message}: {source}")]
    Io {
        /// The message being read or written.
        message: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The caller's QP connect step, run in the middle of an exchange, failed.
    #[error("connecting the QP failed: {0}")]
    Connect(#[source] Box<dyn StdError + Send + Sync>),
    /// A number of QPs perftest does not run ([`perftest::check_qps`]).
    #[error("{qps} QPs: {reason}")]
    QpCount {
        /// The number asked for.
        qps: usize,
        /// What the limit is.
        reason: &'static str,
    },
    /// A [`perftest::Session`] step was called out of order.
    #[error("perftest session: {called} cannot follow {after}")]
    Sequence {
        /// The step called.
        called: &'static str,
        /// The last step done.
        after: &'static str,
    },
}

/// Escapes bytes for an error message (printable ASCII as is, others as `\xNN`).
fn escaped(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}
