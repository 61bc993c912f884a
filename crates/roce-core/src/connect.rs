//! The one recipe that takes a QP from RESET to RTS: the three `modify_qp` steps and the
//! attributes each transition requires by QP type (the verbs state table, `qp/state.rs`), as
//! ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong and perftest do it once they know their
//! peer. Everything that connects a QP — the simulator, the device's endpoints, the tools, the
//! tests, the fuzzer and the benchmarks — uses this, so the recipe exists once.

use roce_wire::{Psn, Qpn};

use crate::config::Mtu;
use crate::mr::Access;
use crate::qp::{AddressVector, QpAttr};
use crate::qp::{QpState, QpType};
use crate::{Nic, VerbsError};

/// What a QP needs to know of its peer and of its transport to reach RTS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connect {
    /// The QP's transport service: it decides which attributes each step carries.
    pub qp_type: QpType,
    /// The path: our address and the peer's (RC and UC).
    pub av: AddressVector,
    /// The peer's QP (RC and UC).
    pub dest_qpn: Qpn,
    /// The PSN our responder expects first (RC and UC).
    pub rq_psn: Psn,
    /// The PSN our requester sends first.
    pub sq_psn: Psn,
    /// Remote rights our responder grants (RC and UC).
    pub access: Access,
    /// The UD QP's Q_Key.
    pub qkey: u32,
    /// The path MTU (RC and UC).
    pub mtu: Mtu,
    /// READs and atomics we may have outstanding (RC).
    pub max_rd_atomic: u8,
    /// READs and atomics of the peer we keep answers for (RC).
    pub max_dest_rd_atomic: u8,
    /// The RNR timer code our responder sends (RC).
    pub min_rnr_timer: u8,
    /// Local ACK timeout exponent: 4.096 µs × 2^timeout (RC).
    pub timeout: u8,
    /// Transport retries (RC).
    pub retry_cnt: u8,
    /// RNR retries, 7 meaning for ever (RC).
    pub rnr_retry: u8,
}

impl Connect {
    /// An RC QP on `av` to the peer's `dest_qpn`, with ibv_rc_pingpong's attributes (path MTU
    /// 1024, one READ or atomic each way, RNR timer code 12, ACK timeout 14, seven retries of
    /// each kind) and every remote right.
    pub const fn rc(av: AddressVector, dest_qpn: Qpn, rq_psn: Psn, sq_psn: Psn) -> Self {
        Self {
            qp_type: QpType::Rc,
            av,
            dest_qpn,
            rq_psn,
            sq_psn,
            access: Access::ALL,
            qkey: 0,
            mtu: Mtu::Mtu1024,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
        }
    }

    /// RESET → INIT on P_Key index 0 of port 1, with nothing else: what every QP type's first
    /// step starts from.
    pub fn init() -> QpAttr {
        QpAttr {
            qp_state: Some(QpState::Init),
            pkey_index: Some(0),
            port_num: Some(1),
            ..QpAttr::default()
        }
    }

    /// The first step of a connected (RC or UC) QP whose responder grants `access`: receives
    /// may be posted from here on.
    pub fn init_with(access: Access) -> QpAttr {
        QpAttr {
            access_flags: Some(access),
            ..Self::init()
        }
    }

    /// The three steps: RESET → INIT, INIT → RTR, RTR → RTS.
    pub fn steps(&self) -> [QpAttr; 3] {
        let state = |s| QpAttr {
            qp_state: Some(s),
            ..QpAttr::default()
        };
        let init = Self::init();
        // What UC needs to reach RTR and RTS; RC adds its reliability attributes.
        let access = Self::init_with(self.access);
        let rtr = QpAttr {
            av: Some(self.av),
            path_mtu: Some(self.mtu),
            dest_qpn: Some(self.dest_qpn),
            rq_psn: Some(self.rq_psn),
            ..state(QpState::Rtr)
        };
        let rts = QpAttr {
            sq_psn: Some(self.sq_psn),
            ..state(QpState::Rts)
        };
        match self.qp_type {
            QpType::Rc => [
                access,
                QpAttr {
                    max_dest_rd_atomic: Some(self.max_dest_rd_atomic),
                    min_rnr_timer: Some(self.min_rnr_timer),
                    ..rtr
                },
                QpAttr {
                    timeout: Some(self.timeout),
                    retry_cnt: Some(self.retry_cnt),
                    rnr_retry: Some(self.rnr_retry),
                    max_rd_atomic: Some(self.max_rd_atomic),
                    ..rts
                },
            ],
            QpType::Uc => [access, rtr, rts],
            // A UD QP has no peer: the destination comes with each send WR.
            QpType::Ud => [
                QpAttr {
                    qkey: Some(self.qkey),
                    ..init
                },
                state(QpState::Rtr),
                rts,
            ],
        }
    }
}

impl Nic {
    /// Takes `qpn` from RESET to RTS by `connect`'s three steps (see [`Connect::steps`]).
    pub fn connect_qp(&mut self, qpn: Qpn, connect: &Connect) -> Result<(), VerbsError> {
        connect
            .steps()
            .iter()
            .try_for_each(|attr| self.modify_qp(qpn, attr))
    }
}
