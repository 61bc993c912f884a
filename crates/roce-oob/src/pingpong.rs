//! `ibv_rc_pingpong`'s out-of-band exchange (rdma-core 44, `libibverbs/examples/rc_pingpong.c`
//! `pp_client_exch_dest` / `pp_server_exch_dest`, and `pingpong.c` `gid_to_wire_gid`).
//!
//! One text message each way, `sprintf("%04x:%06x:%06x:%s", lid, qpn, psn, gid)` in a buffer of
//! `sizeof "0000:000000:000000:00000000000000000000000000000000"` = 52 bytes, sent whole with
//! its NUL. The GID is 32 hex digits: `gid_to_wire_gid` prints the GID's four 32-bit words
//! with `%08x` after `htobe32`, i.e. the 16 GID bytes in wire order. `ibv_ud_pingpong` uses the
//! same message and order.
//!
//! The order, on one TCP connection to port 18515:
//!
//! 1. the client writes its 52 bytes;
//! 2. the server reads them, **moves its QP to RTR and RTS** (`pp_connect_ctx`), then writes
//!    its own 52 bytes — [`server_read`], then the caller's connect, then [`server_reply`];
//! 3. the client reads them and at once writes `"done\0"` (5 bytes), closes the socket and only
//!    then moves its QP to RTR/RTS — [`client_exchange`], or [`client_send`],
//!    [`client_recv`], [`client_done`] one at a time;
//! 4. the server reads the 5 bytes (a single `read()` that must return exactly 5) and closes.
//!
//! ```no_run
//! # async fn demo() -> Result<(), roce_oob::OobError> {
//! use roce_oob::pingpong::{self, Dest};
//! let mut stream = tokio::net::TcpStream::connect(("198.18.0.11", roce_oob::DEFAULT_PORT))
//!     .await
//!     .map_err(|source| roce_oob::OobError::Io { message: "connect", source })?;
//! let mine = Dest { lid: 0, qpn: 0x11, psn: 0x42577c, gid: [0; 16] };
//! let theirs = pingpong::client_exchange(&mut stream, &mine).await?;
//! // now move the local QP to RTR (dest_qpn = theirs.qpn, rq_psn = theirs.psn) and RTS
//! # let _ = theirs;
//! # Ok(())
//! # }
//! ```

use std::error::Error as StdError;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::io::{read_done, read_msg, write_msg};
use crate::text::{TextReader, TextWriter};
use crate::{DONE, OobError, Stream};

/// The length of the address message, its NUL included.
pub const MSG_LEN: usize = 52;

const MESSAGE: &str = "ibv_rc_pingpong address";

/// One side's address as `ibv_rc_pingpong` sends it (`struct pingpong_dest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dest {
    /// The port's LID (0 on RoCE).
    pub lid: u16,
    /// The QP number; 24 bits, higher bits are not sent.
    pub qpn: u32,
    /// The first PSN this side sends (`lrand48() & 0xffffff`); 24 bits, higher bits are not
    /// sent.
    pub psn: u32,
    /// The GID at the `-g` index, in wire order; all zero without `-g`.
    pub gid: [u8; 16],
}

impl Dest {
    /// Whether the peer will address this side with a GRH: `pp_connect_ctx` sets
    /// `ah_attr.is_global` only when the GID's interface ID (its last 8 bytes) is non-zero,
    /// so without `-g` there is no GRH, which RoCE cannot route.
    pub fn is_global(&self) -> bool {
        self.gid[8..] != [0; 8]
    }
}

/// The 52-byte message for `dest`, NUL included. QPN and PSN are 24-bit quantities; bits above
/// 24 are dropped, as they would be in the BTH.
pub fn encode(dest: &Dest) -> [u8; MSG_LEN] {
    let mut out = [0u8; MSG_LEN];
    let mut w = TextWriter::new(&mut out);
    w.hex(u64::from(dest.lid), 4)
        .byte(b':')
        .hex(u64::from(dest.qpn & 0xff_ffff), 6)
        .byte(b':')
        .hex(u64::from(dest.psn & 0xff_ffff), 6)
        .byte(b':');
    for byte in dest.gid {
        w.hex(u64::from(byte), 2);
    }
    w.byte(0);
    out
}

/// Parses a 52-byte message: exactly 4, 6 and 6 hex digits separated by `':'`, a `':'`, 32 hex
/// digits of GID and the NUL. `ibv_rc_pingpong` itself reads it with the laxer
/// `sscanf("%x:%x:%x:%s")`; everything it sends is in this stricter form.
pub fn decode(msg: &[u8]) -> Result<Dest, OobError> {
    if msg.len() != MSG_LEN {
        return Err(OobError::Length {
            message: MESSAGE,
            expected: MSG_LEN,
            got: msg.len(),
        });
    }
    let mut r = TextReader::new(msg, MESSAGE);
    let lid = r.hex_colon("LID", 4)?;
    let qpn = r.hex_colon("QPN", 6)?;
    let psn = r.hex_colon("PSN", 6)?;
    let mut gid = [0u8; 16];
    for byte in &mut gid {
        // Each GID byte is two of the 32 digits; name the whole GID in errors.
        *byte = r.hex("GID", 2)? as u8;
    }
    r.delim(0, "GID")?;
    Ok(Dest {
        lid: lid as u16,
        qpn: qpn as u32,
        psn: psn as u32,
        gid,
    })
}

/// Client step 1: writes the local address.
pub async fn client_send<S>(stream: &mut S, local: &Dest) -> Result<(), OobError>
where
    S: AsyncWrite + Unpin + ?Sized,
{
    write_msg(stream, &encode(local), MESSAGE).await
}

/// Client step 2: reads the server's address (the server has already moved its QP to RTS).
pub async fn client_recv<S>(stream: &mut S) -> Result<Dest, OobError>
where
    S: AsyncRead + Unpin + ?Sized,
{
    let mut buf = [0u8; MSG_LEN];
    read_msg(stream, &mut buf, MESSAGE).await?;
    decode(&buf)
}

/// Client step 3: writes `"done\0"`, which the server waits for before it starts.
pub async fn client_done<S>(stream: &mut S) -> Result<(), OobError>
where
    S: AsyncWrite + Unpin + ?Sized,
{
    write_msg(stream, &DONE, "closing \"done\"").await
}

/// The whole client side as `ibv_rc_pingpong` runs it: writes `local`, reads the server's
/// address, writes `"done\0"` and returns the server's address. The caller then moves its QP to
/// RTR/RTS and may drop the stream (rc_pingpong closes it here).
pub async fn client_exchange<S: Stream + ?Sized>(
    stream: &mut S,
    local: &Dest,
) -> Result<Dest, OobError> {
    client_send(stream, local).await?;
    let remote = client_recv(stream).await?;
    client_done(stream).await?;
    Ok(remote)
}

/// Server step 1: reads the client's address. The caller then moves its QP to RTR/RTS before
/// [`server_reply`], as `pp_server_exch_dest` does: the client may send as soon as it has the
/// reply.
pub async fn server_read<S>(stream: &mut S) -> Result<Dest, OobError>
where
    S: AsyncRead + Unpin + ?Sized,
{
    let mut buf = [0u8; MSG_LEN];
    read_msg(stream, &mut buf, MESSAGE).await?;
    decode(&buf)
}

/// Server step 2: writes the local address, then reads and checks the client's `"done\0"`.
pub async fn server_reply<S: Stream + ?Sized>(
    stream: &mut S,
    local: &Dest,
) -> Result<(), OobError> {
    write_msg(stream, &encode(local), MESSAGE).await?;
    read_done(stream).await
}

/// The whole server side: [`server_read`], then `connect(client's address)` (move the QP to
/// RTR/RTS there; its error becomes [`OobError::Connect`] and nothing more is written), then
/// [`server_reply`]. Returns the client's address.
pub async fn server_exchange<S, F, Fut, E>(
    stream: &mut S,
    local: &Dest,
    connect: F,
) -> Result<Dest, OobError>
where
    S: Stream + ?Sized,
    F: FnOnce(Dest) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Into<Box<dyn StdError + Send + Sync>>,
{
    let remote = server_read(stream).await?;
    connect(remote)
        .await
        .map_err(|e| OobError::Connect(e.into()))?;
    server_reply(stream, local).await?;
    Ok(remote)
}

/// The two lines `ibv_rc_pingpong` prints when it finishes (rc_pingpong.c, end of `main`):
///
/// ```text
/// %lld bytes in %.2f seconds = %.2f Mbit/sec
/// %d iters in %.2f seconds = %.2f usec/iter
/// ```
///
/// with `bytes = size * iters * 2` (both directions), and the elapsed time held, as there, in a
/// C `float` of microseconds (`elapsed_usec` is the `gettimeofday` difference): the
/// `usec/iter` figure is a `float` division, the others `double`. Each line ends in `'\n'`.
/// Non-finite results print as C prints them (`inf`, `nan`).
pub fn summary(size: u32, iters: u32, elapsed_usec: i64) -> String {
    let usec = elapsed_usec as f32;
    let bytes = i64::from(size) * i64::from(iters) * 2;
    let seconds = f64::from(usec) / 1_000_000.0;
    let mbit = bytes as f64 * 8.0 / f64::from(usec);
    let per_iter = f64::from(usec / iters as f32);
    format!(
        "{bytes} bytes in {} seconds = {} Mbit/sec\n{} iters in {} seconds = {} usec/iter\n",
        c_fixed2(seconds),
        c_fixed2(mbit),
        // `%d` of an unsigned int.
        iters as i32,
        c_fixed2(seconds),
        c_fixed2(per_iter),
    )
}

/// `printf("%.2f", x)`.
fn c_fixed2(x: f64) -> String {
    if x.is_nan() {
        if x.is_sign_negative() { "-nan" } else { "nan" }.to_owned()
    } else if x.is_infinite() {
        if x < 0.0 { "-inf" } else { "inf" }.to_owned()
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::v4_gid;

    /// mtu1500-rc_s64_m1024.pcap frame 6: `ibv_rc_pingpong -g 1 -s 64 -m 1024 -n 10`, client
    /// 198.18.0.12 to server 198.18.0.11.
    const CLIENT_S64: &[u8; 52] = b"0000:000011:ad1776:00000000000000000000ffffc612000c\0";
    /// mtu1500-rc_s64_m1024.pcap frame 8, the server's reply.
    const SERVER_S64: &[u8; 52] = b"0000:000011:efc206:00000000000000000000ffffc612000b\0";

    #[test]
    fn golden_messages_from_the_capture() {
        let client = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xad1776,
            gid: v4_gid(12),
        };
        let server = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xefc206,
            gid: v4_gid(11),
        };
        assert_eq!(&encode(&client), CLIENT_S64);
        assert_eq!(&encode(&server), SERVER_S64);
        assert_eq!(decode(CLIENT_S64).unwrap(), client);
        assert_eq!(decode(SERVER_S64).unwrap(), server);
        assert!(client.is_global());
    }

    #[test]
    fn round_trip_extremes() {
        for dest in [
            Dest::default(),
            Dest {
                lid: 0xffff,
                qpn: 0xff_ffff,
                psn: 0xff_ffff,
                gid: [0xff; 16],
            },
            Dest {
                lid: 0x1234,
                qpn: 0xabcdef,
                psn: 1,
                gid: *b"\xfe\x80\0\0\0\0\0\0\x02\x11\x22\xff\xfe\x33\x44\x55",
            },
        ] {
            let msg = encode(&dest);
            assert_eq!(msg[51], 0);
            assert_eq!(decode(&msg).unwrap(), dest);
        }
        assert!(!Dest::default().is_global());
    }

    #[test]
    fn qpn_and_psn_are_24_bits() {
        let dest = Dest {
            qpn: 0x0100_0011,
            psn: 0xff12_3456,
            ..Dest::default()
        };
        let back = decode(&encode(&dest)).unwrap();
        assert_eq!((back.qpn, back.psn), (0x11, 0x12_3456));
    }

    #[test]
    fn malformed_messages_say_what_is_wrong() {
        let err = |m: &[u8]| decode(m).unwrap_err();
        assert!(matches!(
            err(&CLIENT_S64[..51]),
            OobError::Length {
                expected: 52,
                got: 51,
                ..
            }
        ));
        let mut m = *CLIENT_S64;
        m[2] = b'x';
        assert!(matches!(
            err(&m),
            OobError::Hex {
                field: "LID",
                offset: 0,
                ..
            }
        ));
        let mut m = *CLIENT_S64;
        m[11] = b'-';
        assert!(matches!(
            err(&m),
            OobError::Delimiter {
                after: "QPN",
                offset: 11,
                found: b'-',
                ..
            }
        ));
        let mut m = *CLIENT_S64;
        m[14] = b' ';
        assert!(matches!(err(&m), OobError::Hex { field: "PSN", .. }));
        let mut m = *CLIENT_S64;
        m[40] = b'g';
        assert!(matches!(
            err(&m),
            OobError::Hex {
                field: "GID",
                offset: 39,
                ..
            }
        ));
        let mut m = *CLIENT_S64;
        m[51] = b'0';
        assert!(matches!(
            err(&m),
            OobError::Delimiter {
                after: "GID",
                expected: '\0',
                ..
            }
        ));
        // The error text names the field.
        let mut m = *CLIENT_S64;
        m[5] = b'Z';
        let text = err(&m).to_string();
        assert!(
            text.contains("QPN") && text.contains("6 hex digits"),
            "{text}"
        );
    }

    #[test]
    fn uppercase_hex_is_accepted_like_sscanf() {
        let msg = b"00AB:0000FF:ABCDEF:FE800000000000000000FFFFC612000C\0";
        let d = decode(msg).unwrap();
        assert_eq!((d.lid, d.qpn, d.psn), (0xab, 0xff, 0xabcdef));
        assert_eq!(d.gid[0], 0xfe);
    }

    #[test]
    fn summary_lines_match_printf() {
        // size 4096, 1000 iterations, 1.5 s: 8192000 bytes, 43.69 Mbit/s, 1500 usec/iter.
        assert_eq!(
            summary(4096, 1000, 1_500_000),
            "8192000 bytes in 1.50 seconds = 43.69 Mbit/sec\n\
             1000 iters in 1.50 seconds = 1500.00 usec/iter\n"
        );
        // The elapsed time goes through a C float: 16777217 usec becomes 16777216.
        assert_eq!(
            summary(1, 1, 16_777_217),
            "2 bytes in 16.78 seconds = 0.00 Mbit/sec\n\
             1 iters in 16.78 seconds = 16777216.00 usec/iter\n"
        );
        assert!(summary(64, 10, 0).starts_with("1280 bytes in 0.00 seconds = inf Mbit/sec\n"));
    }
}
