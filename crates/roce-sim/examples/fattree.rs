//! HPCC's evaluation topology (`mix/fat.txt`: 320 hosts at 100 Gb/s, 56 switches at 400 Gb/s,
//! 1 µs links) with FB_Hadoop flow sizes at a Poisson load, played on real NICs: how fast the
//! simulator runs at research scale, in packet-hops (one packet over one link) per wall second,
//! and the FCT-slowdown table of the flows.
//!
//! PFC on priority 3 (lossless, as HPCC runs), no ECN, no DCQCN unless `ROCE_FATTREE_DCQCN=1`
//! (then RED marking at 100–400 KB, NVIDIA's DCQCN defaults). Knobs (environment):
//!
//! - `ROCE_FATTREE_WINDOW_US`: flows start in the first this many µs (default 1000);
//! - `ROCE_FATTREE_DRAIN_MS`: simulated time after the window for them to finish (default 20);
//! - `ROCE_FATTREE_LOAD`: load of each host's link, 0–1 (default 0.3);
//! - `ROCE_FATTREE_SEED`: the workload's seed (default 1);
//! - `ROCE_FATTREE_BYTES=1`: carry and check every payload byte and ICRC (default: lengths only,
//!   [`Payload::Lengths`], which checks that every host's region took the bytes of the flows
//!   finished towards it when all of them finished).
//!
//! `cargo run --release -p roce-sim --example fattree`

use std::time::Instant as WallClock;

use roce_core::{Congestion, DcqcnConfig, Duration, Instant};
use roce_sim::network::{Network, NetworkConfig, Payload};
use roce_sim::switch::{Pfc, SwitchConfig};
use roce_sim::workload::{Cdf, Traffic, poisson};
use roce_sim::{EcnMarking, SlowdownTable, topology};

fn main() {
    if let Err(e) = run() {
        eprintln!("fattree: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let window_us: u64 = env("ROCE_FATTREE_WINDOW_US", 1000)?;
    let drain_ms: u64 = env("ROCE_FATTREE_DRAIN_MS", 20)?;
    let load: f64 = env("ROCE_FATTREE_LOAD", 0.3)?;
    let seed: u64 = env("ROCE_FATTREE_SEED", 1)?;
    let dcqcn: u8 = env("ROCE_FATTREE_DCQCN", 0)?;
    let full_bytes: u8 = env("ROCE_FATTREE_BYTES", 0)?;

    let topology = topology::hpcc_fat();
    let traffic = Traffic {
        hosts: topology.hosts().collect(),
        host_rate_bps: 100_000_000_000,
        start: Instant::ZERO,
        duration: Duration::from_micros(window_us),
        pg: 3,
        dport: 100,
        seed,
    };
    let flows = poisson(&traffic, load, &Cdf::fb_hadoop()).map_err(|e| e.to_string())?;
    let bytes: u64 = flows.iter().map(|f| f.size_bytes).sum();

    let mut config = NetworkConfig {
        switch: SwitchConfig {
            buffer_bytes: 4 << 20,
            pfc: Some(Pfc {
                xoff_bytes: 256 << 10,
                xon_bytes: 128 << 10,
                pause_quanta: 0xffff,
                priorities: 1 << 3,
            }),
            ..SwitchConfig::default()
        },
        payload: if full_bytes != 0 {
            Payload::Bytes
        } else {
            Payload::Lengths
        },
        ..NetworkConfig::default()
    };
    if dcqcn != 0 {
        config.host.nic.congestion = Congestion::Dcqcn(DcqcnConfig::default());
        config.switch.ecn = Some(EcnMarking {
            k_min_bytes: 100_000,
            k_max_bytes: 400_000,
            p_max: 0.2,
        });
    }
    let mut net = Network::new(topology, config).map_err(|e| e.to_string())?;
    println!(
        "hpcc fat.txt: 320 hosts, 56 switches; FB_Hadoop at {:.0} % load for {window_us} µs: {} flows, {:.1} MB; DCQCN {}",
        load * 100.0,
        flows.len(),
        bytes as f64 / 1e6,
        if dcqcn != 0 { "on" } else { "off" },
    );

    let wall = WallClock::now();
    let until = Instant::from_micros(window_us) + Duration::from_millis(drain_ms);
    let records = net.run_flows(&flows, until);
    let secs = wall.elapsed().as_secs_f64();

    let outcome = net.flow_outcome();
    let hops = net.packet_hops();
    println!(
        "flows done {} of {} (failed {}, unfinished {}), simulated {:.3} ms",
        outcome.finished,
        flows.len(),
        outcome.failed,
        outcome.unfinished,
        net.now().as_nanos() as f64 / 1e6
    );
    println!(
        "packet-hops {hops}, wall {secs:.2} s, {:.0} packet-hops per wall second, drops {}",
        hops as f64 / secs.max(1e-9),
        net.drops()
    );
    if outcome.finished == flows.len() as u64 && full_bytes == 0 {
        let hosts: Vec<_> = net.routes().topology().hosts().collect();
        for h in hosts {
            let want: u64 = flows
                .iter()
                .filter(|f| f.dst == h)
                .map(|f| f.size_bytes)
                .sum();
            let got = net.bytes_written(h).unwrap_or(0);
            if got != want {
                return Err(format!(
                    "host {h:?}: its region took {got} bytes, not {want}"
                ));
            }
        }
        println!("every region took the bytes of the flows to it ({bytes} in all)");
    }
    let (peak, events) = net.event_counts();
    println!("events {events} (at most {peak} pending at once)");
    let table = SlowdownTable::new(&records, 5).map_err(|e| e.to_string())?;
    print!("{}", table.to_text());
    Ok(())
}

/// The environment variable `name` parsed, or `default` when it is unset.
fn env<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("{name}={v:?}: not a valid value (see the example's docs)")),
        Err(_) => Ok(default),
    }
}
