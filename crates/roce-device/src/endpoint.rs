//! An RC QP on a device and the three `modify_qp` calls that connect it, as ibv_rc_pingpong and
//! perftest make them once the out-of-band exchange has told each side the other's QPN and PSN.

use std::net::IpAddr;

use roce_core::{
    Access, AddressVector, Connect, CqHandle, Mtu, PdHandle, Psn, QpInit, QpType, Qpn,
};

use crate::{DeviceError, DeviceHandle};

/// What one side learns of the other, and the settings of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// Our address (source GID).
    pub local: IpAddr,
    /// The peer's address (destination GID).
    pub remote: IpAddr,
    /// The peer's QPN.
    pub remote_qpn: Qpn,
    /// The first PSN the peer sends (our responder expects it).
    pub remote_psn: Psn,
    /// The first PSN we send.
    pub local_psn: Psn,
    /// Path MTU.
    pub mtu: Mtu,
    /// Local ACK timeout exponent (ibv_rc_pingpong: 14).
    pub timeout: u8,
    /// Transport retries (ibv_rc_pingpong: 7).
    pub retry_cnt: u8,
    /// RNR retries (ibv_rc_pingpong: 7, infinite).
    pub rnr_retry: u8,
    /// RNR timer code of our RNR NAKs (ibv_rc_pingpong: 12, 0.64 ms).
    pub min_rnr_timer: u8,
    /// READs and atomics we may have outstanding.
    pub max_rd_atomic: u8,
    /// READs and atomics we serve at once.
    pub max_dest_rd_atomic: u8,
    /// Remote rights our responder grants.
    pub access: Access,
    /// DSCP of the QP's packets (GRH traffic class bits 7:2); RoCE commonly uses 26.
    pub dscp: u8,
}

impl Connection {
    /// ibv_rc_pingpong's settings (rc_pingpong.c `pp_connect_ctx`), with every remote right
    /// granted so WRITE, READ and atomics work too.
    pub fn new(
        local: IpAddr,
        remote: IpAddr,
        remote_qpn: Qpn,
        remote_psn: Psn,
        local_psn: Psn,
    ) -> Self {
        Self {
            local,
            remote,
            remote_qpn,
            remote_psn,
            local_psn,
            mtu: Mtu::Mtu1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            access: Access::ALL,
            dscp: 0,
        }
    }

    /// The engine's recipe for these settings.
    pub fn recipe(&self) -> Connect {
        Connect {
            access: self.access,
            mtu: self.mtu,
            max_rd_atomic: self.max_rd_atomic,
            max_dest_rd_atomic: self.max_dest_rd_atomic,
            min_rnr_timer: self.min_rnr_timer,
            timeout: self.timeout,
            retry_cnt: self.retry_cnt,
            rnr_retry: self.rnr_retry,
            ..Connect::rc(
                AddressVector {
                    dscp: self.dscp,
                    ..AddressVector::new(self.local, self.remote)
                },
                self.remote_qpn,
                self.remote_psn,
                self.local_psn,
            )
        }
    }
}

/// An RC QP with its PD and CQ.
#[derive(Debug, Clone)]
pub struct RcEndpoint {
    /// The device.
    pub device: DeviceHandle,
    /// Its protection domain.
    pub pd: PdHandle,
    /// Its completion queue (send and receive).
    pub cq: CqHandle,
    /// The QP.
    pub qpn: Qpn,
}

impl RcEndpoint {
    /// Creates a PD, a CQ and an RC QP in RESET with queues of `depth`.
    pub async fn create(device: &DeviceHandle, depth: usize) -> Result<Self, DeviceError> {
        let pd = device.alloc_pd().await?;
        let cq = device.create_cq(depth * 2).await?;
        let init = QpInit::new(QpType::Rc, pd, cq, depth);
        let qpn = device.create_qp(init).await?;
        Ok(Self {
            device: device.clone(),
            pd,
            cq,
            qpn,
        })
    }

    /// RESET → INIT (receives may be posted from here on), the first step of
    /// [`roce_core::Connect`]'s recipe.
    pub async fn init(&self, access: Access) -> Result<(), DeviceError> {
        let init = Connect::init_with(access);
        self.device.modify_qp(self.qpn, init).await
    }

    /// INIT → RTR → RTS, the other two steps of the recipe.
    pub async fn connect(&self, c: &Connection) -> Result<(), DeviceError> {
        let [_, rtr, rts] = c.recipe().steps();
        self.device.modify_qp(self.qpn, rtr).await?;
        self.device.modify_qp(self.qpn, rts).await
    }
}
