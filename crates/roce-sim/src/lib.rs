//! Deterministic simulation of RoCEv2 NICs: any number of `roce_core::Nic`s over simulated links
//! in virtual time.
//!
//! The simulator plays the part of a backend: it carries the UDP payloads a NIC sends, with the
//! IP fields the ICRC and ECN need, to the NIC at the other end. A [`Link`] is one direction of a
//! wire with a switch queue in front of it: latency, bandwidth, a drop-tail queue with RED ECN
//! marking, random loss, corruption, duplication and reordering, and exact targeted [`Fault`]s
//! for tests that need one particular packet to go missing.
//!
//! Everything is a function of the seeds and of the `now` the caller passes in: the same seeds
//! and the same calls give the same packets at the same simulated times, down to the bit. Time is
//! [`roce_core::Instant`], from zero; nothing here reads a clock.
//!
//! Topologies: a [`Pair`] (two NICs over two links), a [`Net`] (N nodes, full mesh of links), and
//! a [`Fabric`]: N hosts on the ports of one [`Switch`] (shared buffer, eight classes per port,
//! RED ECN marking at enqueue or dequeue, PFC PAUSEs per priority, ETS), the congestion point of
//! DCQCN. [`scenario`] runs congestion experiments on a fabric (the flows, a time series of
//! goodput, DCQCN rates, the bottleneck queue, drops, PAUSEs, CE marks and CNPs): what
//! `roce sim` plays from a TOML file.
//!
//! Research scale: [`topology`] (multi-switch topologies from HPCC's files or generated
//! fat-trees, BFS routes and ECMP), [`workload`] (flow-size CDFs, flow files,
//! Poisson/incast/permutation generators) and [`fct`] (per-flow FCT records, HPCC's `fct.txt` and
//! the FCT-slowdown table of its `fct_analysis.py`), played by [`network::Network`]: NICs and
//! switches on a topology, ECMP, hop-by-hop PFC, one event queue.
//!
//! With the `toml` feature, `roce_sim::file` reads scenario files (TOML) into these types: a
//! one-switch [`Scenario`], or a network scenario's topology, workload and
//! [`network::NetworkConfig`]; with `--set` overrides and the grids of sweeps.
//!
//! [`Capture`] writes what crossed the links as a pcap stamped with simulated time, and
//! [`trace_to_test_output`] sends the logs of a test to its output.

#![warn(missing_docs)]

mod capture;
mod decimal;
mod event_loop;
mod fabric;
mod fault;
pub mod fct;
#[cfg(feature = "toml")]
pub mod file;
mod link;
mod net;
pub mod network;
mod pair;
mod pattern;
mod prefetch;
pub mod scenario;
mod scheduled;
mod serialisation;
pub mod switch;
mod text;
pub mod topology;
mod trace;
pub mod workload;

pub use capture::{Capture, PCAP_DIR_VAR};
pub use fabric::Fabric;
pub use fault::{Fault, PacketMeta, Verdict};
pub use fct::{FctRecord, SlowdownTable};
pub use link::{
    DEFAULT_LATENCY, EcnMarking, Fate, IPV4_FRAME_OVERHEAD, IPV6_FRAME_OVERHEAD, Link, LinkConfig,
    LinkStats, Sent, SimPacket,
};
pub use net::Net;
pub use pair::{A_ADDR, B_ADDR, Pair, PairConfig, Side, connect};
pub use pattern::pattern;
pub use scenario::{Scenario, Series};
pub use switch::{Switch, SwitchConfig};
pub use text::BadField;
pub use topology::{NodeId, NodeKind, Routes, Topology};
pub use trace::{TraceGuard, set_sim_time, trace_to_test_output};
pub use workload::{Cdf, FlowSpec};
