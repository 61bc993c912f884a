//! [`Session`]: the steps in the order the test's plan gives, for one QP or N.

use tokio::io::{AsyncRead, AsyncWrite};

use super::messages::{
    BwReport, IbvMtu, KEYS, PeerVersion, PerftestDest, RunParams, SysData, VERSION,
};
use super::plan::{Test, check_qps};
use super::steps::{
    END, Exchange, PeerDone, SYNC, Side, close_connection, exchange_bw_reports, exchange_mtu,
    exchange_sys_data, exchange_versions_with, hand_shake_as,
};
use crate::OobError;

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
    /// perftest's `-b`: both sides run traffic, and the end of a write/read/atomic test has no
    /// handshake and report of its own ([`Session::exchange_reports`] runs after each run).
    pub duplex: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            version: VERSION.to_owned(),
            sys: SysData::default(),
            mtu: IbvMtu::Mtu1024,
            params: None,
            duplex: false,
        }
    }
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
    exchange: Exchange,
    duplex: bool,
}

impl<S> Session<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    /// Runs the version, system data and MTU exchanges on a connected stream.
    pub async fn start(
        stream: S,
        side: Side,
        test: Test,
        config: &Config,
    ) -> Result<Self, OobError> {
        Self::start_over(stream, side, test, config, Exchange::Ethernet).await
    }

    /// [`Session::start`] on `exchange`'s channel: with [`Exchange::RdmaCm`], `stream` carries
    /// each write as one SEND and each read is one received message.
    pub async fn start_over(
        mut stream: S,
        side: Side,
        test: Test,
        config: &Config,
        exchange: Exchange,
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
            exchange,
            duplex: config.duplex,
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

    /// One handshake sending QP `qp`'s keys; returns the peer's.
    async fn hand_shake(
        &mut self,
        qp: usize,
        message: &'static str,
    ) -> Result<PerftestDest, OobError> {
        hand_shake_as(
            &mut self.stream,
            self.side,
            self.exchange,
            &self.local[qp],
            message,
        )
        .await
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
            remote = self.hand_shake(qp, message).await?;
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
            remote.push(self.hand_shake(qp, message).await?);
        }
        Ok(remote)
    }

    /// With `-R`, one of the two handshakes `create_rdma_cm_connection` runs around the data
    /// QPs' rdma_cm connections, before any keys (they send perftest's zeroed `my_dest[0]`):
    /// call it, connect the data QPs through the CM, call it again, then
    /// [`Session::exchange_keys`]. [`OobError::Sequence`] after the keys.
    pub async fn rdma_cm_sync(&mut self) -> Result<(), OobError> {
        self.step("rdma_cm_sync", Stage::Started, Stage::Started)?;
        self.hand_shakes(0, 1, SYNC).await.map(|_| ())
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
    /// entry, more than [`MAX_QPS`](super::MAX_QPS), or more than one in a latency test (perftest:
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

    /// With `-b`, after a run (each size's, with `-a`): this side's report for the peer's
    /// (`xchg_bw_reports`, five 8-byte values each way, no handshake before); each side then
    /// prints the sum of both (write_bw.c, read_bw.c, atomic_bw.c and send_bw.c `if
    /// (user_param.duplex) { xchg_bw_reports(...); print_full_bw_report(&my_bw_rep,
    /// &rem_bw_rep); }`; send_bw.c not with `-D`).
    pub async fn exchange_reports(&mut self, report: &BwReport) -> Result<BwReport, OobError> {
        self.step("exchange_reports", Stage::Ready, Stage::Ready)?;
        exchange_bw_reports(&mut self.stream, self.side, report).await
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
        // With -b each run's report was exchanged already, and nobody waits for the client.
        if self.test.exchanges_report() && !self.duplex {
            finish.remote = Some(self.hand_shakes(0, 1, END).await?);
            finish.remote_report =
                Some(exchange_bw_reports(&mut self.stream, self.side, report).await?);
        }
        if self.test.closes_with_done() && self.exchange == Exchange::RdmaCm {
            // ctx_close_connection: the handshake, and no "done" with rdma_cm.
            finish.remote = Some(self.hand_shakes(0, 1, END).await?);
        } else if self.test.closes_with_done() {
            let (remote, done) =
                close_connection(&mut self.stream, self.side, &self.local[0]).await?;
            finish.remote = Some(remote);
            finish.peer_done = Some(done);
        }
        Ok(finish)
    }
}
