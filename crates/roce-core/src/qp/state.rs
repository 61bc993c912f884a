//! The QP state machine of verbs (IBTA vol. 1 §10.3.1 and §11.2.4.2), as the kernel's
//! `ib_modify_qp_is_ok` (drivers/infiniband/core/verbs.c `qp_state_table`) checks it: which
//! transitions exist, and which attributes each one requires and allows per QP type.

use super::QpAttr;
use crate::VerbsError;
use roce_wire::Qpn;

/// The state of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Just created, or reset: nothing is processed.
    Reset,
    /// Initialised: receive WRs may be posted, nothing is processed.
    Init,
    /// Ready to receive: the responder works.
    Rtr,
    /// Ready to send: requester and responder work.
    Rts,
    /// Send queue drain: no new send WR starts.
    Sqd,
    /// Send queue error (UC, UD).
    Sqe,
    /// Error: every WR is flushed, nothing is processed.
    Err,
}

/// The transport service of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable Connected.
    Rc,
    /// Unreliable Connected.
    Uc,
    /// Unreliable Datagram.
    Ud,
}

/// One attribute of `QpAttr`, by its `ibv_qp_attr_mask` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attr {
    PkeyIndex,
    Port,
    Qkey,
    AccessFlags,
    Av,
    PathMtu,
    DestQpn,
    RqPsn,
    MaxDestRdAtomic,
    MinRnrTimer,
    Timeout,
    RetryCnt,
    RnrRetry,
    SqPsn,
    MaxQpRdAtomic,
}

impl Attr {
    const ALL: [Self; 15] = [
        Self::PkeyIndex,
        Self::Port,
        Self::Qkey,
        Self::AccessFlags,
        Self::Av,
        Self::PathMtu,
        Self::DestQpn,
        Self::RqPsn,
        Self::MaxDestRdAtomic,
        Self::MinRnrTimer,
        Self::Timeout,
        Self::RetryCnt,
        Self::RnrRetry,
        Self::SqPsn,
        Self::MaxQpRdAtomic,
    ];

    const fn name(self) -> &'static str {
        match self {
            Self::PkeyIndex => "pkey_index",
            Self::Port => "port_num",
            Self::Qkey => "qkey",
            Self::AccessFlags => "access_flags",
            Self::Av => "av",
            Self::PathMtu => "path_mtu",
            Self::DestQpn => "dest_qpn",
            Self::RqPsn => "rq_psn",
            Self::MaxDestRdAtomic => "max_dest_rd_atomic",
            Self::MinRnrTimer => "min_rnr_timer",
            Self::Timeout => "timeout",
            Self::RetryCnt => "retry_cnt",
            Self::RnrRetry => "rnr_retry",
            Self::SqPsn => "sq_psn",
            Self::MaxQpRdAtomic => "max_rd_atomic",
        }
    }

    fn present(self, attr: &QpAttr) -> bool {
        match self {
            Self::PkeyIndex => attr.pkey_index.is_some(),
            Self::Port => attr.port_num.is_some(),
            Self::Qkey => attr.qkey.is_some(),
            Self::AccessFlags => attr.access_flags.is_some(),
            Self::Av => attr.av.is_some(),
            Self::PathMtu => attr.path_mtu.is_some(),
            Self::DestQpn => attr.dest_qpn.is_some(),
            Self::RqPsn => attr.rq_psn.is_some(),
            Self::MaxDestRdAtomic => attr.max_dest_rd_atomic.is_some(),
            Self::MinRnrTimer => attr.min_rnr_timer.is_some(),
            Self::Timeout => attr.timeout.is_some(),
            Self::RetryCnt => attr.retry_cnt.is_some(),
            Self::RnrRetry => attr.rnr_retry.is_some(),
            Self::SqPsn => attr.sq_psn.is_some(),
            Self::MaxQpRdAtomic => attr.max_rd_atomic.is_some(),
        }
    }
}

/// Required and optional attributes of one transition for one QP type.
struct Rule {
    required: &'static [Attr],
    optional: &'static [Attr],
}

use Attr::*;

/// The transition table (`qp_state_table` in drivers/infiniband/core/verbs.c, ROCE columns).
/// `None`: the transition does not exist for this QP type.
fn rule(from: QpState, to: QpState, qp_type: QpType) -> Option<Rule> {
    use QpState::*;
    use QpType::*;
    const ANY_STATE: &[Attr] = &[];
    let r = |required, optional| Some(Rule { required, optional });
    match (from, to, qp_type) {
        // Any state may go to RESET and, except RESET, to ERR, with no attribute.
        (_, Reset, _) => r(ANY_STATE, ANY_STATE),
        (Reset, Err, _) => None,
        (_, Err, _) => r(ANY_STATE, ANY_STATE),
        (Reset, Init, Rc | Uc) => r(&[PkeyIndex, Port, AccessFlags], &[]),
        (Reset, Init, Ud) => r(&[PkeyIndex, Port, Qkey], &[]),
        (Init, Init, Rc | Uc) => r(&[], &[PkeyIndex, Port, AccessFlags]),
        (Init, Init, Ud) => r(&[], &[PkeyIndex, Port, Qkey]),
        (Init, Rtr, Rc) => r(
            &[Av, PathMtu, DestQpn, RqPsn, MaxDestRdAtomic, MinRnrTimer],
            &[PkeyIndex, AccessFlags],
        ),
        (Init, Rtr, Uc) => r(&[Av, PathMtu, DestQpn, RqPsn], &[PkeyIndex, AccessFlags]),
        (Init, Rtr, Ud) => r(&[], &[PkeyIndex, Qkey]),
        (Rtr, Rts, Rc) => r(
            &[SqPsn, Timeout, RetryCnt, RnrRetry, MaxQpRdAtomic],
            &[AccessFlags, MinRnrTimer],
        ),
        (Rtr, Rts, Uc) => r(&[SqPsn], &[AccessFlags]),
        (Rtr, Rts, Ud) => r(&[SqPsn], &[Qkey]),
        (Rts | Sqd, Rts, Rc) => r(&[], &[AccessFlags, MinRnrTimer]),
        (Rts | Sqd, Rts, Uc) => r(&[], &[AccessFlags]),
        (Rts | Sqd, Rts, Ud) => r(&[], &[Qkey]),
        (Rts, Sqd, _) => r(&[], &[]),
        (Sqd, Sqd, Rc) => r(
            &[],
            &[
                AccessFlags,
                Av,
                PathMtu,
                Timeout,
                RetryCnt,
                RnrRetry,
                MaxQpRdAtomic,
                MaxDestRdAtomic,
                MinRnrTimer,
                PkeyIndex,
            ],
        ),
        (Sqd, Sqd, Uc) => r(&[], &[AccessFlags, Av, PathMtu, PkeyIndex]),
        (Sqd, Sqd, Ud) => r(&[], &[PkeyIndex, Qkey]),
        (Sqe, Rts, Uc) => r(&[], &[AccessFlags]),
        (Sqe, Rts, Ud) => r(&[], &[Qkey]),
        _ => None,
    }
}

/// Checks a `modify_qp` against the table: the transition exists for the QP type, every required
/// attribute is given and no attribute outside required ∪ optional is. Returns the new state.
//= ibta:vol1/10.3.1
//# the QP state transitions and the attributes each requires (also §11.2.4.2)
pub(crate) fn check_transition(
    qpn: Qpn,
    qp_type: QpType,
    from: QpState,
    attr: &QpAttr,
) -> Result<QpState, VerbsError> {
    let to = attr.qp_state.unwrap_or(from);
    let rule = rule(from, to, qp_type).ok_or(VerbsError::InvalidTransition { qpn, from, to })?;
    for needed in rule.required {
        if !needed.present(attr) {
            return Err(VerbsError::MissingAttribute {
                qpn,
                to,
                attr: needed.name(),
            });
        }
    }
    for given in Attr::ALL.iter().filter(|a| a.present(attr)) {
        if !rule.required.contains(given) && !rule.optional.contains(given) {
            return Err(VerbsError::UnexpectedAttribute {
                qpn,
                qp_type,
                to,
                attr: given.name(),
            });
        }
    }
    Ok(to)
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::config::Mtu;
    use crate::mr::Access;
    use crate::qp::AddressVector;
    use roce_wire::Psn;

    const QPN: Qpn = Qpn::new(0x11);

    fn to(state: QpState) -> QpAttr {
        QpAttr {
            qp_state: Some(state),
            ..QpAttr::default()
        }
    }

    /// ibv_rc_pingpong's three transitions (rc_pingpong.c `pp_init_ctx`, `pp_connect_ctx`).
    fn rc_pingpong() -> [QpAttr; 3] {
        let ip = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
        [
            QpAttr {
                pkey_index: Some(0),
                port_num: Some(1),
                access_flags: Some(Access::NONE),
                ..to(QpState::Init)
            },
            QpAttr {
                av: Some(AddressVector::new(ip, ip)),
                path_mtu: Some(Mtu::Mtu1024),
                dest_qpn: Some(Qpn::new(0x12)),
                rq_psn: Some(Psn::new(0x42)),
                max_dest_rd_atomic: Some(1),
                min_rnr_timer: Some(12),
                ..to(QpState::Rtr)
            },
            QpAttr {
                timeout: Some(14),
                retry_cnt: Some(7),
                rnr_retry: Some(7),
                sq_psn: Some(Psn::new(0x43)),
                max_rd_atomic: Some(1),
                ..to(QpState::Rts)
            },
        ]
    }

    #[test]
    fn rc_pingpong_transitions_are_accepted() {
        let mut state = QpState::Reset;
        for attr in rc_pingpong() {
            state = check_transition(QPN, QpType::Rc, state, &attr).unwrap();
        }
        assert_eq!(state, QpState::Rts);
    }

    #[test]
    fn a_missing_attribute_is_named() {
        let [_, mut rtr, _] = rc_pingpong();
        rtr.min_rnr_timer = None;
        let err = check_transition(QPN, QpType::Rc, QpState::Init, &rtr).unwrap_err();
        let expected = VerbsError::MissingAttribute {
            qpn: QPN,
            to: QpState::Rtr,
            attr: "min_rnr_timer",
        };
        assert_eq!(err, expected);
        // UC does not need it, and does not accept it either.
        rtr.max_dest_rd_atomic = None;
        assert_eq!(
            check_transition(QPN, QpType::Uc, QpState::Init, &rtr),
            Ok(QpState::Rtr)
        );
    }

    #[test]
    fn an_unexpected_attribute_is_named() {
        let [init, ..] = rc_pingpong();
        let with_qkey = QpAttr {
            qkey: Some(1),
            ..init
        };
        let err = check_transition(QPN, QpType::Rc, QpState::Reset, &with_qkey).unwrap_err();
        assert!(
            matches!(err, VerbsError::UnexpectedAttribute { attr: "qkey", .. }),
            "{err}"
        );
    }

    #[test]
    fn transitions_that_do_not_exist() {
        for (from, target) in [
            (QpState::Reset, QpState::Rtr),
            (QpState::Reset, QpState::Err),
            (QpState::Init, QpState::Rts),
            (QpState::Err, QpState::Rts),
            (QpState::Rtr, QpState::Sqd),
        ] {
            let err = check_transition(QPN, QpType::Rc, from, &to(target)).unwrap_err();
            assert_eq!(
                err,
                VerbsError::InvalidTransition {
                    qpn: QPN,
                    from,
                    to: target
                }
            );
        }
        // SQE → RTS exists for UC and UD only.
        assert!(check_transition(QPN, QpType::Rc, QpState::Sqe, &to(QpState::Rts)).is_err());
        assert!(check_transition(QPN, QpType::Uc, QpState::Sqe, &to(QpState::Rts)).is_ok());
    }

    #[test]
    fn reset_and_error_are_always_reachable() {
        for from in [
            QpState::Init,
            QpState::Rtr,
            QpState::Rts,
            QpState::Sqd,
            QpState::Err,
        ] {
            for qp_type in [QpType::Rc, QpType::Uc, QpType::Ud] {
                assert_eq!(
                    check_transition(QPN, qp_type, from, &to(QpState::Err)),
                    Ok(QpState::Err)
                );
                assert_eq!(
                    check_transition(QPN, qp_type, from, &to(QpState::Reset)),
                    Ok(QpState::Reset)
                );
            }
        }
    }

    #[test]
    fn ud_needs_a_qkey_at_init() {
        let init = QpAttr {
            pkey_index: Some(0),
            port_num: Some(1),
            ..to(QpState::Init)
        };
        let err = check_transition(QPN, QpType::Ud, QpState::Reset, &init).unwrap_err();
        assert!(matches!(
            err,
            VerbsError::MissingAttribute { attr: "qkey", .. }
        ));
        let init = QpAttr {
            qkey: Some(0x1111_1111),
            ..init
        };
        assert_eq!(
            check_transition(QPN, QpType::Ud, QpState::Reset, &init),
            Ok(QpState::Init)
        );
    }
}
