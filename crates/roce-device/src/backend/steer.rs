//! Steering the datagrams of one address among the processes that share its NIC: a classic BPF
//! program for the `SO_REUSEPORT` group of their UDP sockets (`SO_ATTACH_REUSEPORT_CBPF`, which
//! needs no privilege), returning the index in the group of the socket whose engine owns what
//! the datagram names ([`roce_core::share`]).
//!
//! The kernel runs it on the UDP payload (`reuseport_select_sock` pulls the UDP header first):
//! the BTH's DestQP (bytes 5–7) names the QP, whose slot is its top byte. A datagram to QP 1 is
//! a CM MAD (BTH 12 + DETH 8 + the MAD): a REQ or a SIDR REQ goes to the engine that listens on
//! its service ID (bytes 52–59), a SIDR REP to the one whose request ID it answers (bytes
//! 44–47), and every other CM message to the one whose comm ID it names back as the remote comm
//! ID (bytes 48–51: REP, RTU, REJ, MRA, DREQ, DREP, LAP, APR). What names no member (a REQ
//! nobody listens for, a slot whose process is gone) goes to the first member, whose engine
//! answers it as a NIC answers what it does not know. An index past the group's end makes the
//! kernel fall back to its hash: the program never returns one.
//!
//! A socket's index is its place in the group: sockets join at the end, and the kernel moves
//! the last one into the place of one that leaves (`reuseport_detach_sock`). The members'
//! registry keeps that order ([`Steering`] is built from it) and a member attaches a new
//! program whenever it changes.

use nix::libc::sock_filter;

/// UDP-payload offsets read by the program.
mod at {
    /// The BTH's second word: a reserved byte, then DestQP.
    pub(super) const DEST_QP_WORD: u32 = 4;
    /// The MAD's attribute ID (BTH 12 + DETH 8 + 16 into the MAD header).
    pub(super) const ATTRIBUTE_ID: u32 = 36;
    /// The first word of a CM message's data: a local comm ID, or a SIDR request ID.
    pub(super) const CM_DATA: u32 = 44;
    /// The second: a remote comm ID.
    pub(super) const REMOTE_COMM_ID: u32 = 48;
    /// A REQ's or SIDR REQ's service ID, high and low words.
    pub(super) const SERVICE_ID_HIGH: u32 = 52;
    pub(super) const SERVICE_ID_LOW: u32 = 56;
}

/// CM attribute IDs (IBTA vol. 1 §12.6) that are not routed by the remote comm ID.
const REQ: u32 = 0x0010;
const SIDR_REQ: u32 = 0x0017;
const SIDR_REP: u32 = 0x0018;

/// Who gets what: the group's members by slot, with their sockets' indices, and the service IDs
/// listened on, with the index of the listener's socket.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Steering {
    /// `(slot, index)`, one per member; the first is where what names nobody goes.
    pub members: Vec<(u8, u16)>,
    /// `(service ID, index)`, one per service listened on.
    pub listeners: Vec<(u64, u16)>,
}

// Classic BPF opcodes (<linux/bpf_common.h>: class | size | mode, class | op | source).
const LD_W_ABS: u16 = 0x20; // BPF_LD 0x00 | BPF_W 0x00 | BPF_ABS 0x20
const LD_H_ABS: u16 = 0x28; // BPF_LD 0x00 | BPF_H 0x08 | BPF_ABS 0x20
const ALU_AND_K: u16 = 0x54; // BPF_ALU 0x04 | BPF_AND 0x50 | BPF_K 0x00
const ALU_RSH_K: u16 = 0x74; // BPF_ALU 0x04 | BPF_RSH 0x70 | BPF_K 0x00
const JMP_JA: u16 = 0x05; // BPF_JMP 0x05 | BPF_JA 0x00
const JMP_JEQ_K: u16 = 0x15; // BPF_JMP 0x05 | BPF_JEQ 0x10 | BPF_K 0x00
const RET_K: u16 = 0x06; // BPF_RET 0x06 | BPF_K 0x00

fn op(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

impl Steering {
    /// The index what names nobody goes to.
    fn default_index(&self) -> u32 {
        self.members
            .first()
            .map_or(0, |&(_, index)| u32::from(index))
    }

    /// The program, laid out as
    ///
    /// ```text
    ///  0 ld [4]; 1 and #0xffffff        A = DestQP
    ///  2 jeq #1, 4, 3                    QP 1?
    ///  3 ja QPN                          no: by the QPN's slot
    ///  4 ldh [36]                        the MAD's attribute ID
    ///  5 jeq #REQ, SERVICE, 6
    ///  6 jeq #SIDR_REQ, SERVICE, 7
    ///  7 jeq #SIDR_REP, 10, 8
    ///  8 ld [48]; 9 ja 11                the remote comm ID
    /// 10 ld [44]                         the SIDR request ID
    /// 11 rsh #24; 12 ja SLOT             its slot
    /// SERVICE: per listener, ld [52]; jeq hi; ld [56]; jeq lo; ret index — then ret default
    /// QPN: rsh #16
    /// SLOT: per member, jeq slot; ret index — then ret default
    /// ```
    ///
    /// Conditional jumps are short (at most 8 ahead); the two to the tables are `ja`s, whose
    /// 32-bit offsets reach past any number of listeners. Listeners beyond what fits in the
    /// kernel's 4096 instructions are left out: their REQs go to the default member.
    pub fn program(&self) -> Vec<sock_filter> {
        const SERVICE: usize = 13;
        let room = (MAX_INSTRUCTIONS - SERVICE - 3 - 2 * self.members.len()) / 5;
        let listeners = &self.listeners[..self.listeners.len().min(room)];
        let qpn = SERVICE + 5 * listeners.len() + 1;
        let slot = qpn + 1;
        let ja = |from: usize, to: usize| (to - from - 1) as u32;
        let default = self.default_index();
        let mut p = vec![
            op(LD_W_ABS, 0, 0, at::DEST_QP_WORD),
            op(ALU_AND_K, 0, 0, 0x00ff_ffff),
            op(JMP_JEQ_K, 1, 0, 1),
            op(JMP_JA, 0, 0, ja(3, qpn)),
            op(LD_H_ABS, 0, 0, at::ATTRIBUTE_ID),
            op(JMP_JEQ_K, (SERVICE - 6) as u8, 0, REQ),
            op(JMP_JEQ_K, (SERVICE - 7) as u8, 0, SIDR_REQ),
            op(JMP_JEQ_K, 2, 0, SIDR_REP),
            op(LD_W_ABS, 0, 0, at::REMOTE_COMM_ID),
            op(JMP_JA, 0, 0, 1),
            op(LD_W_ABS, 0, 0, at::CM_DATA),
            op(ALU_RSH_K, 0, 0, roce_core::share::ID_SLOT_SHIFT),
            op(JMP_JA, 0, 0, ja(12, slot)),
        ];
        debug_assert_eq!(p.len(), SERVICE);
        for &(service_id, index) in listeners {
            p.push(op(LD_W_ABS, 0, 0, at::SERVICE_ID_HIGH));
            p.push(op(JMP_JEQ_K, 0, 3, (service_id >> 32) as u32));
            p.push(op(LD_W_ABS, 0, 0, at::SERVICE_ID_LOW));
            p.push(op(JMP_JEQ_K, 0, 1, service_id as u32));
            p.push(op(RET_K, 0, 0, u32::from(index)));
        }
        p.push(op(RET_K, 0, 0, default));
        debug_assert_eq!(p.len(), qpn);
        p.push(op(ALU_RSH_K, 0, 0, roce_core::share::QPN_SLOT_SHIFT));
        for &(slot, index) in &self.members {
            p.push(op(JMP_JEQ_K, 0, 1, u32::from(slot)));
            p.push(op(RET_K, 0, 0, u32::from(index)));
        }
        p.push(op(RET_K, 0, 0, default));
        p
    }
}

/// The slot whose member the program sends the datagram with this UDP payload to, when its
/// DestQP decides it; `None` for a CM MAD (QP 1: what it names decides) and for what is too
/// short to carry a BTH (the program's default). The batches a NIC sends are cut by it
/// (`crate::batch`): the receiving kernel steers a batch whole, by its first packet.
pub(crate) fn slot_of(udp_payload: &[u8]) -> Option<u8> {
    let word = udp_payload.get(at::DEST_QP_WORD as usize..at::DEST_QP_WORD as usize + 4)?;
    let dest_qp = u32::from_be_bytes(word.try_into().ok()?) & 0x00ff_ffff;
    (dest_qp != 1).then(|| roce_core::share::slot_of_qpn(dest_qp))
}

impl Steering {
    /// Attaches the program to the `SO_REUSEPORT` group of `socket`, for every member.
    pub fn attach(&self, socket: &impl std::os::fd::AsRawFd) -> std::io::Result<()> {
        super::sys::attach_reuseport_cbpf(socket, &self.program())
    }
}

/// The most instructions a classic BPF program may have (`BPF_MAXINSNS`).
const MAX_INSTRUCTIONS: usize = 4096;

#[cfg(test)]
mod tests;
