//! RoCEv2 packets to the bit.
//!
//! This crate is the wire layer of roce-emu. It is sans-IO and allocation-free on the packet
//! path: it reads and writes bytes that someone else received or will send.
//!
//! Each header has the shape of smoltcp's `wire` module: a zero-copy view `Packet<T: AsRef<[u8]>>`
//! whose `new_checked` makes every accessor total, and a `Repr` with `parse` and `emit` that holds
//! the fields as Rust values. The headers are those of IBTA vol. 1 ch. 9 as RoCEv2 carries them in
//! UDP (Annex A17): [`bth`], [`reth`], [`aeth`], [`deth`], [`immdt`], [`ieth`], [`atomic_eth`],
//! [`atomic_ack_eth`], [`feth`], and the RoCEv2 [`cnp`]; [`int`] is HPCC's telemetry header, which
//! roce-emu's NICs put after the BTH when both ends run HPCC. [`mad`] holds the Management Datagrams
//! that ride in UD SENDs to QP 1: the MAD header and the connection manager's messages. [`opcode`] holds the one table that says
//! which headers and how much payload follow each opcode. [`packet`] puts them together into the
//! UDP payload that a RoCEv2 NIC exchanges, and [`icrc`] computes the invariant CRC that ends it.
//! [`frame`] reads and writes whole Ethernet/IP/UDP frames around it (through etherparse), and
//! [`pretty`] prints any of it as one line per packet.
//!
//! The contract, for every function that reads bytes: it never panics, whatever the bytes, and
//! every rejection is a named [`ParseError`] variant, so that a receiver can count each reason.

#![warn(missing_docs)]

mod bytes;
mod field;

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod cnp;
pub mod deth;
mod error;
pub mod feth;
pub mod frame;
pub mod fuzzing;
pub mod gid;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod int;
pub mod mac_control;
pub mod mad;
pub mod opcode;
pub mod packet;
pub mod pint;
pub mod pretty;
mod psn;
pub mod reth;

pub use aeth::{NakCode, Repr as AethRepr, Syndrome};
pub use atomic_ack_eth::Repr as AtomicAckEthRepr;
pub use atomic_eth::Repr as AtomicEthRepr;
pub use bth::Repr as BthRepr;
pub use deth::Repr as DethRepr;
pub use error::{EmitError, Layer, ParseError};
pub use feth::Repr as FethRepr;
pub use gid::Gid;
pub use icrc::{IpFields, PseudoHeader};
pub use ieth::Repr as IethRepr;
pub use immdt::Repr as ImmDtRepr;
pub use mad::cm::{CmMad, Message as CmMessage};
pub use opcode::Opcode;
pub use packet::{Packet as RocePacket, Repr as RoceRepr};
pub use psn::{Psn, Qpn};
pub use reth::Repr as RethRepr;

/// The UDP destination port of RoCEv2 (IBA Annex A17.2.1; rxe `ROCE_V2_UDP_DPORT`).
pub const ROCE_V2_UDP_PORT: u16 = 4791;
