//! The single steps of the exchange, each one or more `ctx_xchg_data` / `ctx_hand_shake` on the
//! stream: the client writes then reads, the server reads then writes.

use super::keys_struct::{KEY_STRUCT_SIZE, decode_keys_struct, encode_keys_struct};
use super::messages::{
    BwReport, IbvMtu, KEY_MSG_SIZE, KEY_MSG_SIZE_GID, KEYS, MIN_PEER_VERSION, MTU_MSG_LEN,
    PeerVersion, PerftestDest, RunParams, SysData, VERSION_LEN, decode_keys_in, decode_mtu,
    decode_version, encode_keys, encode_mtu, encode_version_with,
};
use crate::io::{read_msg, write_msg};
use crate::{DONE, OobError, Stream, escaped};

/// Which end of the TCP connection this is (`servername` given or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Connects; writes first in every step.
    Client,
    /// Accepts; reads first in every step.
    Server,
}

/// Which channel perftest's exchange runs on: the messages are the same but for the keys and
/// the close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Exchange {
    /// A TCP connection (no `-R`): keys as text, `"done\0"` at the close.
    #[default]
    Ethernet,
    /// perftest's `-R` (`use_rdma_cm`): an RC connection made by rdma_cm, each message one
    /// SEND of its own length: keys as the binary `struct pingpong_dest`
    /// ([`super::encode_keys_struct`]), no `"done"` (`ctx_close_connection` writes it only
    /// without rdma_cm).
    RdmaCm,
}

/// One `ctx_xchg_data`: the client writes `mine` then reads `theirs`, the server the other way
/// round.
async fn xchg<S: Stream + ?Sized>(
    stream: &mut S,
    side: Side,
    mine: &[u8],
    theirs: &mut [u8],
    message: &'static str,
) -> Result<(), OobError> {
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
pub async fn exchange_versions<S: Stream + ?Sized>(
    stream: &mut S,
    side: Side,
    version: &str,
) -> Result<PeerVersion, OobError> {
    exchange_versions_with(stream, side, version, None).await
}

/// [`exchange_versions`], announcing `params` after the version's NUL ([`RunParams`]).
pub async fn exchange_versions_with<S: Stream + ?Sized>(
    stream: &mut S,
    side: Side,
    version: &str,
    params: Option<&RunParams>,
) -> Result<PeerVersion, OobError> {
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
pub async fn exchange_sys_data<S: Stream + ?Sized>(
    stream: &mut S,
    side: Side,
    mine: SysData,
) -> Result<SysData, OobError> {
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
pub async fn exchange_mtu<S: Stream + ?Sized>(
    stream: &mut S,
    side: Side,
    mine: IbvMtu,
) -> Result<IbvMtu, OobError> {
    let mut theirs = [0u8; MTU_MSG_LEN];
    xchg(stream, side, &encode_mtu(mine), &mut theirs, "perftest MTU").await?;
    decode_mtu(&theirs)
}

/// One `ctx_hand_shake`: sends `local`'s keys, returns the peer's. The length read is the one
/// `local.gid` implies (perftest copies its own `gid_index` to the remote's before reading).
pub async fn hand_shake<S: Stream + ?Sized>(
    stream: &mut S,
    side: Side,
    local: &PerftestDest,
) -> Result<PerftestDest, OobError> {
    hand_shake_as(stream, side, Exchange::Ethernet, local, KEYS).await
}

/// [`hand_shake`] on `exchange`, with errors that name `message`, the step it is part of.
pub(super) async fn hand_shake_as<S: Stream + ?Sized>(
    stream: &mut S,
    side: Side,
    exchange: Exchange,
    local: &PerftestDest,
    message: &'static str,
) -> Result<PerftestDest, OobError> {
    if exchange == Exchange::RdmaCm {
        let mine = encode_keys_struct(local);
        let mut theirs = [0u8; KEY_STRUCT_SIZE];
        xchg(stream, side, &mine, &mut theirs, message).await?;
        return decode_keys_struct(&theirs, message);
    }
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
pub async fn exchange_bw_reports<S: Stream + ?Sized>(
    stream: &mut S,
    side: Side,
    mine: &BwReport,
) -> Result<BwReport, OobError> {
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
pub async fn close_connection<S: Stream + ?Sized>(
    stream: &mut S,
    side: Side,
    local: &PerftestDest,
) -> Result<(PerftestDest, PeerDone), OobError> {
    let remote = hand_shake_as(stream, side, Exchange::Ethernet, local, END).await?;
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

/// The handshakes after connect, which only synchronise the two sides.
pub(super) const SYNC: &str = "sync before the test (a perftest handshake)";
/// The handshakes of the end of the test.
pub(super) const END: &str = "end-of-test sync (a perftest handshake)";
