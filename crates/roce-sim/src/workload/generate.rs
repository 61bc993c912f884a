//! Seeded workload generators, producing [`FlowSpec`]s sorted by start time.
//!
//! * [`poisson`]: HPCC's background traffic (`traffic_gen/traffic_gen.py`): every host starts
//!   flows as a Poisson process whose mean inter-arrival is `mean_size * 8 / (load * rate)`, so
//!   that each host offers `load` of its NIC rate on average; sizes from a [`Cdf`], destination
//!   uniform over the other hosts. Each host draws from its own ChaCha8 stream (`seed`, stream =
//!   the host's position in the list), so a host's flows do not depend on how many hosts follow.
//! * [`incast`]: HPCC's incast add-on (sim-facts §3.2: "Poisson arrival of incast and every
//!   incast randomly picks one receiver and 60 senders", each sending 500 KB, "2% of the network
//!   capacity"). Our reading of "network capacity", which the source does not pin: the sum of
//!   the host NIC rates, so events arrive at `fraction * hosts * rate / (8 * senders * size)`
//!   per second.
//! * [`permutation`]: each host sends one flow to a distinct other host and receives one (a
//!   uniformly random derangement), the htsim/UEC permutation pattern.
//!
//! Unlike traffic_gen.py (which drops a host's last flow when the *next* arrival would fall past
//! the end), a flow is kept when its own start is before `start + duration`.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roce_core::{Duration, Instant};

use super::{Cdf, FlowSpec};
use crate::topology::NodeId;

/// Parameters shared by the generators.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    /// The hosts that send and receive (at least two, distinct).
    pub hosts: Vec<NodeId>,
    /// Every host's NIC rate, bit/s.
    pub host_rate_bps: u64,
    /// First possible start.
    pub start: Instant,
    /// Flows start in `[start, start + duration)`.
    pub duration: Duration,
    /// Priority group of the flows (HPCC: 3).
    pub pg: u8,
    /// Destination port of the flows (HPCC: 100 for background, 200 for incast).
    pub dport: u16,
    /// Seed of the ChaCha8 generator.
    pub seed: u64,
}

/// Why a generator refused its parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// Fewer than two hosts, or a host listed twice.
    #[error("need at least two distinct hosts, got {0:?}")]
    Hosts(Vec<NodeId>),
    /// A host rate of 0.
    #[error("host rate is 0 bit/s")]
    ZeroRate,
    /// A load or fraction that is not in (0, 1].
    #[error("load {0} is not in (0, 1]")]
    BadLoad(f64),
    /// More incast senders than hosts other than the receiver, or none.
    #[error("{senders} incast senders: need 1 to {others} (the hosts other than the receiver)")]
    BadSenders {
        /// Senders asked for.
        senders: usize,
        /// Hosts available.
        others: usize,
    },
    /// A flow size of 0.
    #[error("flow size is 0 bytes")]
    ZeroSize,
}

/// Poisson background traffic at `load` (of each host's NIC rate) with sizes from `cdf`.
pub fn poisson(t: &Traffic, load: f64, cdf: &Cdf) -> Result<Vec<FlowSpec>, GenerateError> {
    let mean_gap_ns = poisson_gap_ns(t, load, cdf)?;
    let end = t.start.as_nanos() as f64 + t.duration.as_nanos() as f64;
    let mut flows = Vec::new();
    for (i, &src) in t.hosts.iter().enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(t.seed);
        rng.set_stream(i as u64);
        let mut at = t.start.as_nanos() as f64 + exponential(&mut rng, mean_gap_ns);
        while at < end {
            let dst = other_host(&mut rng, &t.hosts, i);
            let size_bytes = cdf.sample(&mut rng);
            flows.push(flow(t, src, dst, size_bytes, at));
            at += exponential(&mut rng, mean_gap_ns);
        }
    }
    sort(&mut flows);
    Ok(flows)
}

/// How many flows [`poisson`] makes with these parameters on average, without making them
/// (every host's window over its mean gap), after the checks it makes: what a caller sizes
/// memory by before asking for the flows.
pub fn poisson_expected(t: &Traffic, load: f64, cdf: &Cdf) -> Result<f64, GenerateError> {
    let mean_gap_ns = poisson_gap_ns(t, load, cdf)?;
    Ok(t.hosts.len() as f64 * t.duration.as_nanos() as f64 / mean_gap_ns)
}

/// The mean gap between a host's flows, ns, once `t` and `load` are checked.
fn poisson_gap_ns(t: &Traffic, load: f64, cdf: &Cdf) -> Result<f64, GenerateError> {
    check(t, load)?;
    Ok(cdf.mean() * 8.0 / (load * t.host_rate_bps as f64) * 1e9)
}

/// Incast bursts: Poisson events at `fraction` of the total host capacity; each event picks one
/// receiver and `senders` distinct other hosts, each of which sends `size_bytes` to it at the
/// event's time.
pub fn incast(
    t: &Traffic,
    fraction: f64,
    senders: usize,
    size_bytes: u64,
) -> Result<Vec<FlowSpec>, GenerateError> {
    let mean_gap_ns = incast_gap_ns(t, fraction, senders, size_bytes)?;
    let others = t.hosts.len() - 1;
    let end = t.start.as_nanos() as f64 + t.duration.as_nanos() as f64;
    let mut rng = ChaCha8Rng::seed_from_u64(t.seed);
    let mut pool: Vec<usize> = Vec::with_capacity(others);
    let mut flows = Vec::new();
    let mut at = t.start.as_nanos() as f64 + exponential(&mut rng, mean_gap_ns);
    while at < end {
        let receiver = rng.random_range(0..t.hosts.len());
        pool.clear();
        pool.extend((0..t.hosts.len()).filter(|&h| h != receiver));
        let (chosen, _) = pool.partial_shuffle(&mut rng, senders);
        for &s in chosen.iter() {
            flows.push(flow(t, t.hosts[s], t.hosts[receiver], size_bytes, at));
        }
        at += exponential(&mut rng, mean_gap_ns);
    }
    sort(&mut flows);
    Ok(flows)
}

/// How many flows [`incast`] makes with these parameters on average (its events over the
/// window times `senders`), without making them, after the checks it makes.
pub fn incast_expected(
    t: &Traffic,
    fraction: f64,
    senders: usize,
    size_bytes: u64,
) -> Result<f64, GenerateError> {
    let mean_gap_ns = incast_gap_ns(t, fraction, senders, size_bytes)?;
    Ok(t.duration.as_nanos() as f64 / mean_gap_ns * senders as f64)
}

/// The mean gap between incast events, ns, once the parameters are checked.
fn incast_gap_ns(
    t: &Traffic,
    fraction: f64,
    senders: usize,
    size_bytes: u64,
) -> Result<f64, GenerateError> {
    check(t, fraction)?;
    let others = t.hosts.len() - 1;
    if senders == 0 || senders > others {
        return Err(GenerateError::BadSenders { senders, others });
    }
    if size_bytes == 0 {
        return Err(GenerateError::ZeroSize);
    }
    let capacity = t.hosts.len() as f64 * t.host_rate_bps as f64;
    let event_bits = 8.0 * senders as f64 * size_bytes as f64;
    Ok(event_bits / (fraction * capacity) * 1e9)
}

/// One flow of `size_bytes` from every host to a distinct other host, all at `t.start`
/// (`t.duration` is not used).
pub fn permutation(t: &Traffic, size_bytes: u64) -> Result<Vec<FlowSpec>, GenerateError> {
    check(t, 1.0)?;
    if size_bytes == 0 {
        return Err(GenerateError::ZeroSize);
    }
    let n = t.hosts.len();
    let mut rng = ChaCha8Rng::seed_from_u64(t.seed);
    let mut to: Vec<usize> = (0..n).collect();
    // Rejection gives a uniform derangement; a shuffle is one with probability about 1/e.
    loop {
        to.shuffle(&mut rng);
        if to.iter().enumerate().all(|(i, &d)| i != d) {
            break;
        }
    }
    let at = t.start.as_nanos() as f64;
    let mut flows: Vec<FlowSpec> = (0..n)
        .map(|i| flow(t, t.hosts[i], t.hosts[to[i]], size_bytes, at))
        .collect();
    sort(&mut flows);
    Ok(flows)
}

fn check(t: &Traffic, load: f64) -> Result<(), GenerateError> {
    let mut sorted = t.hosts.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() < 2 || sorted.len() != t.hosts.len() {
        return Err(GenerateError::Hosts(t.hosts.clone()));
    }
    if t.host_rate_bps == 0 {
        return Err(GenerateError::ZeroRate);
    }
    if !(load > 0.0 && load <= 1.0) {
        return Err(GenerateError::BadLoad(load));
    }
    Ok(())
}

/// An exponential variate of mean `mean` (inversion, as traffic_gen.py's `poisson`).
fn exponential(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
    -(1.0 - rng.random::<f64>()).ln() * mean
}

/// A host other than `hosts[me]`, uniformly. One `u64` draw scaled by multiplication (bias
/// below n / 2^64) rather than a rejection loop, so that every flow takes the same number of
/// draws whatever the host count: a host's start times do not depend on how many hosts there are.
fn other_host(rng: &mut ChaCha8Rng, hosts: &[NodeId], me: usize) -> NodeId {
    let others = (hosts.len() - 1) as u128;
    let i = ((u128::from(rng.random::<u64>()) * others) >> 64) as usize;
    hosts[if i >= me { i + 1 } else { i }]
}

fn flow(t: &Traffic, src: NodeId, dst: NodeId, size_bytes: u64, at_ns: f64) -> FlowSpec {
    // Times are below 2^53 ns (104 days), where the conversion is exact to the nanosecond.
    let start = Instant::from_nanos(at_ns as u64);
    FlowSpec {
        src,
        dst,
        pg: t.pg,
        dport: t.dport,
        size_bytes,
        start,
    }
}

fn sort(flows: &mut [FlowSpec]) {
    flows.sort_by_key(|f| (f.start, f.src, f.dst));
}

#[cfg(test)]
#[path = "generate_tests.rs"]
mod tests;
