//! Setting up `roce perf`: the device, the QPs and their buffer, the key exchange and the
//! connections, as perftest's tools do before their traffic.

use std::net::IpAddr;

use anyhow::{Context, bail};
use roce_core::{Access, Connect, MemoryRegion, Mtu, Psn, QpInit, QpType, Qpn, Remote, UdDest};
use roce_device::{Connection, DeviceHandle, RcEndpoint};
use roce_oob::perftest::{PerftestDest, Session};
use roce_wire::Gid;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{Args, ConnectionArg, GRH, QKEY};

/// READs and atomics in flight each side offers (`out_reads`), as perftest offers on a device
/// it does not know: the device's `max_qp_rd_atom` (128, rxe's and ours). Fewer kept short
/// READs from filling the window: 4 KiB READs ran at 0.75 × the WRITEs of the same size with 16.
pub(super) const OUT_READS: u16 = 128;

/// What the traffic runs on.
#[derive(Debug)]
pub(super) struct SetUp {
    pub(super) device: DeviceHandle,
    /// QP 0 first.
    pub(super) endpoints: Vec<RcEndpoint>,
    /// The buffer: a send half and a receive half of `half` bytes per QP.
    pub(super) mr: MemoryRegion,
    pub(super) half: usize,
    /// Each QP's buffer at the peer.
    pub(super) remotes: Vec<Remote>,
    /// Each QP's peer QP.
    pub(super) peer_qpns: Vec<Qpn>,
    /// With -c UD, where each QP's datagrams go: the peer's address, QP and Q_Key.
    pub(super) ud: Option<Vec<UdDest>>,
}

/// The device and the test's `-q` QPs, in INIT, not connected yet.
#[derive(Debug)]
pub(super) struct Qps {
    pub(super) device: DeviceHandle,
    /// The address the device plays.
    pub(super) local_ip: IpAddr,
    /// QP 0 first.
    pub(super) endpoints: Vec<RcEndpoint>,
}

impl Qps {
    /// Creates `-q` QPs on `device` and takes them to INIT.
    pub(super) async fn create(
        args: &Args,
        device: DeviceHandle,
        local_ip: IpAddr,
    ) -> anyhow::Result<Self> {
        let depth = (args.tx_depth.max(args.rx_depth()) + 4) as usize;
        let qp_type = match args.connection {
            ConnectionArg::Rc => QpType::Rc,
            ConnectionArg::Uc => QpType::Uc,
            ConnectionArg::Ud => QpType::Ud,
        };
        let endpoints = create_endpoints(&device, depth, args.qps as usize, qp_type).await?;
        for qp in &endpoints {
            if qp_type == QpType::Ud {
                // A UD QP's INIT carries its Q_Key (perftest's DEF_QKEY).
                let [init, _, _] = ud_connect(Psn::new(0)).steps();
                device.modify_qp(qp.qpn, init).await?;
            } else {
                qp.init(Access::ALL).await?;
            }
        }
        Ok(Self {
            device,
            local_ip,
            endpoints,
        })
    }
}

/// Creates `-q` QPs' buffer (room for `largest` bytes a message), exchanges the keys and
/// connects every QP (unless the CM did already: `connected`); then runs the handshakes after
/// connect ([`Session::connected`]).
pub(super) async fn set_up<S>(
    args: &Args,
    session: &mut Session<S>,
    qps_made: Qps,
    largest: u32,
    connected: bool,
) -> anyhow::Result<SetUp>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Qps {
        device,
        local_ip,
        endpoints,
    } = qps_made;
    let qps = args.qps as usize;
    // perftest's buffer: one region, a send half and a receive half per QP, each the larger of
    // the (largest) message and the cycle buffer (`BUFF_SIZE`); QP i sends from
    // `buf + i * BUFF_SIZE` and its keys announce its receive half, where the peer's WRITEs
    // land and where ib_write_lat polls (perftest_resources.c `create_mr`: `buf[i] = buf[0] +
    // i * BUFF_SIZE`; perftest_communication.c `set_up_connection`: `vaddr = buf[0] +
    // (num_of_qps + i) * BUFF_SIZE`; `poll_buf = buf + BUFF_SIZE + size - 1` with one QP).
    let grh = if args.connection == ConnectionArg::Ud {
        GRH
    } else {
        0
    };
    let half = ((largest + grh) as usize)
        .max(session.sys_data().cycle_buffer as usize)
        .max(8);
    let buf_len = 2 * qps * half;
    let mr = device.reg_mr(endpoints[0].pd, buf_len, Access::ALL).await?;
    let out_reads: u16 = OUT_READS;
    let locals: Vec<PerftestDest> = endpoints
        .iter()
        .enumerate()
        .map(|(i, qp)| PerftestDest {
            lid: 0,
            out_reads,
            qpn: qp.qpn.value(),
            psn: initial_psn(),
            rkey: mr.rkey(),
            vaddr: mr.addr() + ((qps + i) * half) as u64,
            gid: Some(Gid::from_ip(local_ip).0),
            srqn: 0,
        })
        .collect();
    let remotes = session.exchange_qp_keys(locals.clone()).await?;
    let path_mtu = Mtu::from_bytes(session.mtu().bytes()).context("the negotiated MTU")?;
    for ((qp, local), remote) in endpoints.iter().zip(&locals).zip(&remotes) {
        if connected {
            break;
        }
        let Some(gid) = remote.gid else {
            bail!("the peer sent no GID")
        };
        let mut connection = Connection::new(
            local_ip,
            Gid(gid).to_ip(),
            Qpn::new(remote.qpn),
            Psn::new(remote.psn),
            Psn::new(local.psn),
        );
        connection.mtu = path_mtu;
        connection.dscp = args.device.dscp;
        // perftest#114: never ask for more outstanding READs/atomics than the peer serves.
        connection.max_rd_atomic = u8::try_from(remote.out_reads.clamp(1, out_reads)).unwrap_or(1);
        connection.max_dest_rd_atomic = u8::try_from(out_reads).unwrap_or(16);
        match args.connection {
            ConnectionArg::Rc => qp.connect(&connection).await?,
            // UC: the same path and PSNs, without RC's reliability attributes; UD: no peer,
            // only the first PSN (each send names its destination).
            other => {
                let recipe = match other {
                    ConnectionArg::Ud => ud_connect(Psn::new(local.psn)),
                    _ => Connect {
                        qp_type: QpType::Uc,
                        ..connection.recipe()
                    },
                };
                let [_, rtr, rts] = recipe.steps();
                device.modify_qp(qp.qpn, rtr).await?;
                device.modify_qp(qp.qpn, rts).await?;
            }
        }
    }
    let ud = (args.connection == ConnectionArg::Ud)
        .then(|| {
            remotes
                .iter()
                .map(|r| {
                    let gid = r.gid.context("the peer sent no GID")?;
                    Ok(UdDest {
                        ip: Gid(gid).to_ip(),
                        qpn: Qpn::new(r.qpn),
                        qkey: QKEY,
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()
        })
        .transpose()?;
    session.connected().await?;
    let peer_qpns = remotes.iter().map(|r| Qpn::new(r.qpn)).collect();
    let remotes = remotes
        .iter()
        .map(|r| Remote {
            addr: r.vaddr,
            rkey: r.rkey,
        })
        .collect();
    Ok(SetUp {
        device,
        endpoints,
        mr,
        half,
        remotes,
        peer_qpns,
        ud,
    })
}

/// A UD QP's recipe: its Q_Key (perftest's `DEF_QKEY`) and first PSN; no path or peer.
fn ud_connect(sq_psn: Psn) -> Connect {
    let unused = IpAddr::from([0, 0, 0, 0]);
    Connect {
        qp_type: QpType::Ud,
        qkey: QKEY,
        ..Connect::rc(
            roce_core::AddressVector::new(unused, unused),
            Qpn::new(0),
            Psn::new(0),
            sq_psn,
        )
    }
}

/// `qps` RC QPs in RESET with queues of `depth`, sharing one PD and one CQ as perftest's QPs
/// share its CQs (`create_reg_cqs`: `tx_depth * num_of_qps` entries); one QP is what
/// [`RcEndpoint::create`] makes.
async fn create_endpoints(
    device: &DeviceHandle,
    depth: usize,
    qps: usize,
    qp_type: QpType,
) -> anyhow::Result<Vec<RcEndpoint>> {
    if qps == 1 && qp_type == QpType::Rc {
        return Ok(vec![RcEndpoint::create(device, depth).await?]);
    }
    let pd = device.alloc_pd().await?;
    let cq = device.create_cq(depth * 2 * qps).await?;
    let mut endpoints = Vec::with_capacity(qps);
    for _ in 0..qps {
        let qpn = device
            .create_qp(QpInit::new(qp_type, pd, cq, depth))
            .await?;
        endpoints.push(RcEndpoint {
            device: device.clone(),
            pd,
            cq,
            qpn,
        });
    }
    Ok(endpoints)
}

/// A 24-bit PSN that differs between runs (perftest: `lrand48() & 0xffffff`).
fn initial_psn() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (nanos.rotate_left(7) ^ std::process::id()) & 0x00ff_ffff
}
