//! Playing flows on a [`Network`]: at each flow's start a fresh RC QP pair between its hosts, its
//! bytes as RDMA WRITEs from the sender's region into the receiver's (regions are reused per
//! host; a flow larger than a region posts several WRITEs, at most [`MAX_POSTED`] at a time), and
//! at the sender's last completion an [`FctRecord`]; the QPs are then destroyed, so that 10^5
//! flows do not keep 10^5 QPs.
//!
//! The ideal FCT is HPCC's standalone FCT ([`ideal_fct`]) over the first shortest path with our
//! own packets ([`ideal_model`]): path-MTU payloads under 14 (Ethernet) + 20 (IPv4) + 8 (UDP) +
//! 12 (BTH) + 4 (ICRC) + 4 (FCS) = 62 header bytes, plus the 16-byte RETH of each WRITE's first
//! packet at the bottleneck rate.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::ControlFlow;

use roce_core::{Duration, Instant, Qpn, Remote, SendOp, SendWr, Sge, WcStatus};
use roce_wire::ROCE_V2_UDP_PORT;
use roce_wire::gid::udp_sport_for_qps;

use super::events::Event;
use super::pool::FCS_BYTES;
use super::wiring::tuple_of;
use super::{FlowVerb, Network};
use crate::IPV4_FRAME_OVERHEAD;
use crate::fct::{FctRecord, IdealModel, ideal_fct};
use crate::pair::connect_nodes;
use crate::topology::FiveTuple;
use crate::workload::FlowSpec;

/// The default size of each host's memory region, and so of the largest WRITE: 256 KiB.
pub const REGION_LEN: usize = 256 << 10;

/// WRs a flow has outstanding at most (WRITEs, or READs: the hosts' initiator depth).
pub const MAX_POSTED: u64 = 16;

/// Bytes of the RETH on the first packet of each WRITE.
pub const RETH_BYTES: u64 = 16;

/// What became of the flows of the last [`Network::run_flows`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowOutcome {
    /// Flows started.
    pub started: u64,
    /// Flows whose last WRITE completed successfully (one [`FctRecord`] each).
    pub finished: u64,
    /// Flows refused (a host that is not one, a flow to itself) or whose WRITE failed.
    pub failed: u64,
    /// Of the failed, those whose WRITE ended with the transport retry counter exceeded
    /// ([`WcStatus::RetryExcErr`]): `retry_cnt + 1` ACK timeouts or sequence NAKs.
    pub retry_exceeded: u64,
    /// Flows still running at the end of the run: abandoned, their QPs destroyed.
    pub unfinished: u64,
}

/// Where a [`Network::run_flows_observed`] run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunProgress {
    /// Simulated time reached.
    pub now: Instant,
    /// Packet-hops so far (the network's count, from its creation).
    pub packet_hops: u64,
    /// Flows started so far in this run.
    pub started: u64,
    /// Flows finished so far in this run.
    pub finished: u64,
}

/// The packetization of our RoCEv2 WRITEs at path MTU `mtu_bytes`, as [`ideal_fct`] takes it.
pub fn ideal_model(mtu_bytes: u64) -> IdealModel {
    IdealModel {
        payload_bytes: mtu_bytes,
        header_bytes: (IPV4_FRAME_OVERHEAD + FCS_BYTES) as u64 + BTH_BYTES + ICRC_BYTES,
    }
}

/// A sentence for the user when the flows are READs and the algorithm hears nothing of their
/// data (HPCC, TIMELY, DCTCP: a READ response takes no ACK back to carry INT, an RTT or ECN
/// to the requester, and the responder has nothing to go by); `None` for WRITEs, without
/// congestion control, and with DCQCN, which a CE-marked response reaches as a CNP.
pub fn read_note(config: &super::NetworkConfig) -> Option<String> {
    use roce_core::Congestion;
    if config.verb != FlowVerb::Read {
        return None;
    }
    let name = match &config.host.nic.congestion {
        Congestion::None | Congestion::Dcqcn(_) => return None,
        Congestion::Dctcp(_) => "DCTCP",
        Congestion::Timely(_) => "TIMELY",
        Congestion::Hpcc(c) if c.pint => "HPCC-PINT",
        Congestion::Hpcc(_) => "HPCC",
    };
    Some(format!(
        "READ flows under {name}: {name} hears nothing of a READ's data (no ACK carries a \
         response's INT, RTT or ECN mark back), so the responses leave as fast as the \
         responder can send them, whatever the queues; DCQCN is the algorithm that slows them \
         here (a CE-marked response brings the responder a CNP)"
    ))
}

impl Network {
    /// Plays `flows` (in any order; each starts at its `start`, or now if that has passed) until
    /// `until`, or until every flow has ended (checked every [`CHECK_EVERY`](super::CHECK_EVERY)
    /// of simulated time); returns one record per flow finished, in completion order. Flows still running
    /// at `until` are abandoned (see [`Network::flow_outcome`]); their packets still in the
    /// network drain in a later run.
    pub fn run_flows(&mut self, flows: &[FlowSpec], until: Instant) -> Vec<FctRecord> {
        self.run_flows_observed(flows, until, |_| ControlFlow::Continue(()))
    }

    /// [`Network::run_flows`], telling `observe` where the run is after every
    /// [`CHECK_EVERY`](super::CHECK_EVERY) of simulated time (for a progress line).
    /// `ControlFlow::Break` stops the run there (a Ctrl-C): the flows finished until then have
    /// their records, the others are abandoned as at `until`.
    pub fn run_flows_observed(
        &mut self,
        flows: &[FlowSpec],
        until: Instant,
        mut observe: impl FnMut(&RunProgress) -> ControlFlow<()>,
    ) -> Vec<FctRecord> {
        let mut order: Vec<u32> = (0..flows.len() as u32).collect();
        order.sort_by_key(|&i| (flows[i as usize].start, i));
        let mut run = FlowRun {
            flows,
            order,
            next: 0,
            active: (0..flows.len()).map(|_| None).collect(),
            records: Vec::new(),
            outcome: FlowOutcome::default(),
            chunk: self.config.host.region_len.clamp(1, u32::MAX as usize) as u64,
            live: 0,
            pairs: HashMap::new(),
        };
        run.schedule_next(self);
        self.start_sampling();
        // In slices, looking for a PFC deadlock after each: one stops the run, as nothing in
        // its loop can move again.
        self.deadlock = None;
        let mut monitor = super::deadlock::Monitor::default();
        let mut at = self.now;
        // Until `until`, or until the last flow has finished: what is still in flight then
        // (ACKs, timers) changes no record.
        while at < until && !run.done() {
            at = (at + super::CHECK_EVERY).min(until);
            self.run_events(at, &mut run);
            let went_on = observe(&RunProgress {
                now: self.now,
                packet_hops: self.packet_hops,
                started: run.outcome.started,
                finished: run.outcome.finished,
            });
            if went_on.is_break() {
                break;
            }
            if let Some(deadlock) = monitor.check(self) {
                tracing::warn!(%deadlock, "run stopped");
                self.deadlock = Some(deadlock);
                break;
            }
        }
        for a in run.active.iter_mut().filter_map(Option::take) {
            run.outcome.unfinished += 1;
            self.close(&a);
        }
        self.outcome = run.outcome;
        run.records
    }

    /// What became of the flows of the last [`Network::run_flows`].
    pub fn flow_outcome(&self) -> FlowOutcome {
        self.outcome
    }

    /// The ideal FCT of `size` bytes from `src` to `dst` sent as WRITEs of at most a region.
    pub fn ideal_fct(&self, src: crate::NodeId, dst: crate::NodeId, size: u64) -> Option<Duration> {
        let mtu = u64::from(self.config.host.mtu.bytes());
        let path = self.routes.path_info(src, dst, mtu)?;
        let chunk = self.config.host.region_len.max(1) as u64;
        let writes = size.div_ceil(chunk).max(1);
        let reth =
            u128::from(writes * RETH_BYTES) * 8_000_000_000 / u128::from(path.bottleneck_bps);
        let reth = Duration::from_nanos(u64::try_from(reth).unwrap_or(u64::MAX));
        Some(ideal_fct(size, &path, ideal_model(mtu)) + reth)
    }

    /// The 5-tuples of a flow's packets, out and back, as switches read them.
    fn flow_tuples(&self, a: &Active) -> Option<(FiveTuple, FiveTuple)> {
        let (s, d) = (self.sides[a.src].addr, self.sides[a.dst].addr);
        let sport = |qpn: Qpn, peer: Qpn| udp_sport_for_qps(qpn.value(), peer.value());
        let out = tuple_of(
            SocketAddr::new(s, sport(a.qpn, a.peer)),
            SocketAddr::new(d, ROCE_V2_UDP_PORT),
        )?;
        let back = tuple_of(
            SocketAddr::new(d, sport(a.peer, a.qpn)),
            SocketAddr::new(s, ROCE_V2_UDP_PORT),
        )?;
        Some((out, back))
    }

    /// Destroys a flow's QPs.
    fn close(&mut self, a: &Active) {
        if self.config.ecmp_ports == super::EcmpPorts::Hpcc
            && let Some(tuples) = self.flow_tuples(a)
        {
            self.wiring.hpcc_flow_ended(tuples);
        }
        for (host, qpn) in [(a.src, a.qpn), (a.dst, a.peer)] {
            // The QP exists: it was created for this flow and is destroyed only here.
            let _ = self.sides[host].nic.destroy_qp(qpn);
        }
    }
}

/// A flow while it runs.
#[derive(Debug)]
struct Active {
    src: usize,
    dst: usize,
    /// The sender's QP.
    qpn: Qpn,
    /// The receiver's QP.
    peer: Qpn,
    /// The responder's region.
    remote: Remote,
    started: Instant,
    posted: u64,
    completed: u64,
    /// WRs the flow takes (WRITEs or READs).
    writes: u64,
    /// Bytes of the last WR.
    last_len: u64,
}

impl Active {
    /// The host that posts the flow's WRs under `verb`, and its QP: the sender's for WRITEs,
    /// the receiver's for READs.
    fn requester(&self, verb: FlowVerb) -> (usize, Qpn) {
        match verb {
            FlowVerb::Write => (self.src, self.qpn),
            FlowVerb::Read => (self.dst, self.peer),
        }
    }
}

/// The flows of one [`Network::run_flows`].
pub(super) struct FlowRun<'a> {
    flows: &'a [FlowSpec],
    /// Flow indexes by start time.
    order: Vec<u32>,
    next: usize,
    active: Vec<Option<Active>>,
    records: Vec<FctRecord>,
    outcome: FlowOutcome,
    /// Bytes per WRITE (the region size).
    chunk: u64,
    /// Flows in `active`.
    live: usize,
    /// Flows started between each two hosts (by their indexes), for
    /// [`EcmpPorts::Hpcc`](super::EcmpPorts::Hpcc).
    pairs: HashMap<(usize, usize), u16>,
}

impl FlowRun<'_> {
    /// Whether every flow has started and ended.
    fn done(&self) -> bool {
        self.outcome.started == self.order.len() as u64 && self.live == 0
    }

    /// Takes flow `i` out of the running ones.
    fn end(&mut self, i: usize) -> Option<Active> {
        let a = self.active.get_mut(i)?.take()?;
        self.live -= 1;
        Some(a)
    }

    /// Flow `i` starts now.
    pub(super) fn start(&mut self, net: &mut Network, i: usize) {
        self.schedule_next(net);
        let flow = self.flows[i];
        self.outcome.started += 1;
        let (Some(src), Some(dst)) = (
            net.wiring.host_index(flow.src.0),
            net.wiring.host_index(flow.dst.0),
        ) else {
            self.outcome.failed += 1;
            return;
        };
        if src == dst {
            self.outcome.failed += 1;
            return;
        }
        let dscp = (flow.pg % 8) * 8;
        let (qpn, peer) = connect_nodes(&net.config.host, &mut net.sides, src, dst, dscp);
        // The requester posts into the responder's region: the receiver's for a WRITE, the
        // sender's for a READ.
        let remote_host = match net.config.verb {
            FlowVerb::Write => dst,
            FlowVerb::Read => src,
        };
        let mr = &net.sides[remote_host].mr;
        let writes = flow.size_bytes.div_ceil(self.chunk).max(1);
        let active = Active {
            src,
            dst,
            qpn,
            peer,
            remote: Remote {
                addr: mr.addr(),
                rkey: mr.rkey(),
            },
            started: net.now,
            posted: 0,
            completed: 0,
            writes,
            last_len: flow.size_bytes - (writes - 1) * self.chunk,
        };
        if net.config.ecmp_ports == super::EcmpPorts::Hpcc
            && let Some(tuples) = net.flow_tuples(&active)
        {
            // third.cc: `portNumder[src][dst]++` from 10 000 for each pair of hosts.
            let n = self.pairs.entry((src, dst)).or_insert(0);
            let sport = 10_000u16.wrapping_add(*n);
            *n = n.wrapping_add(1);
            net.wiring.hpcc_flow(tuples, sport, flow.dport);
        }
        let (requester, _) = active.requester(net.config.verb);
        self.active[i] = Some(active);
        self.live += 1;
        self.post(net, i);
        net.touch(requester, self);
    }

    /// Takes host `h`'s completions; whether a flow posted more WRs.
    pub(super) fn completions(&mut self, net: &mut Network, h: usize) -> bool {
        let mut posted = false;
        // The host's one CQ is emptied below whenever it gained completions, which the NIC
        // lists (`poll_completed_cq`): when it lists none, the CQ is empty and needs no visit
        // (nearly every call, as a packet completes at most one WRITE).
        if net.sides[h].nic.poll_completed_cq().is_none() {
            return false;
        }
        while let Some(cqe) = net.sides[h].completion() {
            let i = (cqe.wr_id >> 32) as usize;
            let Some(a) = self.active.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            if cqe.status != WcStatus::Success {
                self.outcome.failed += 1;
                if cqe.status == WcStatus::RetryExcErr {
                    self.outcome.retry_exceeded += 1;
                }
                if let Some(a) = self.end(i) {
                    net.close(&a);
                }
                continue;
            }
            a.completed += 1;
            if a.completed < a.writes {
                posted |= self.post(net, i);
                continue;
            }
            let a = self.end(i).expect("looked up above");
            let flow = self.flows[i];
            self.records.push(FctRecord {
                src: flow.src,
                dst: flow.dst,
                sport: udp_sport_for_qps(a.qpn.value(), a.peer.value()),
                dport: flow.dport,
                size: flow.size_bytes,
                start: flow.start,
                fct: net.now - a.started,
                ideal: net
                    .ideal_fct(flow.src, flow.dst, flow.size_bytes)
                    .unwrap_or(Duration::ZERO),
            });
            self.outcome.finished += 1;
            net.close(&a);
        }
        posted
    }

    /// Posts flow `i`'s next WRs (WRITEs or READs, `NetworkConfig::verb`), up to
    /// [`MAX_POSTED`] outstanding; whether it posted any.
    fn post(&mut self, net: &mut Network, i: usize) -> bool {
        let Some(a) = self.active[i].as_mut() else {
            return false;
        };
        let verb = net.config.verb;
        let (requester, qpn) = a.requester(verb);
        let side = &mut net.sides[requester];
        let mut any = false;
        while a.posted < a.writes && a.posted - a.completed < MAX_POSTED {
            let len = if a.posted + 1 == a.writes {
                a.last_len
            } else {
                self.chunk
            };
            let sgl = if len == 0 {
                Vec::new()
            } else {
                vec![Sge {
                    addr: side.mr.addr(),
                    length: len as u32,
                    lkey: side.mr.lkey(),
                }]
            };
            let wr_id = ((i as u64) << 32) | a.posted;
            let op = match verb {
                FlowVerb::Write => SendOp::RdmaWrite(a.remote),
                FlowVerb::Read => SendOp::RdmaRead(a.remote),
            };
            let wr = SendWr::new(wr_id, op, sgl);
            if side.nic.post_send(qpn, wr).is_err() {
                self.outcome.failed += 1;
                if let Some(a) = self.end(i) {
                    net.close(&a);
                }
                return any;
            }
            a.posted += 1;
            any = true;
        }
        any
    }

    /// Schedules the next flow to start, at its start or now.
    fn schedule_next(&mut self, net: &mut Network) {
        if let Some(&i) = self.order.get(self.next) {
            self.next += 1;
            let at = self.flows[i as usize].start.max(net.now);
            net.events.push(at, Event::FlowStart { flow: i });
        }
    }
}

const BTH_BYTES: u64 = 12;
const ICRC_BYTES: u64 = 4;
