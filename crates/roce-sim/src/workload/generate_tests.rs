use std::collections::HashSet;

use super::*;

const G: u64 = 1_000_000_000;

fn traffic(hosts: u32, duration: Duration, seed: u64) -> Traffic {
    Traffic {
        hosts: (0..hosts).map(NodeId).collect(),
        host_rate_bps: 100 * G,
        start: Instant::from_millis(2000),
        duration,
        pg: 3,
        dport: 100,
        seed,
    }
}

/// Offered load: bytes of the flows started in the window, over what the hosts' NICs could
/// carry in it.
fn offered_load(t: &Traffic, flows: &[FlowSpec]) -> f64 {
    let bits: f64 = flows.iter().map(|f| f.size_bytes as f64 * 8.0).sum();
    bits / (t.hosts.len() as f64 * t.host_rate_bps as f64 * t.duration.as_secs_f64())
}

#[test]
fn poisson_offers_the_requested_load() {
    for (cdf, load, secs) in [(Cdf::websearch(), 0.5, 0.5), (Cdf::fb_hadoop(), 0.3, 0.05)] {
        let t = traffic(32, Duration::from_secs_f64(secs), 7);
        let flows = poisson(&t, load, &cdf).unwrap();
        let got = offered_load(&t, &flows);
        assert!(
            (got - load).abs() / load < 0.03,
            "offered {got}, asked {load}"
        );
        // Flows per host per second: load * rate / (8 * mean size).
        let want_n = load * 100e9 / (8.0 * cdf.mean()) * secs * 32.0;
        let n = flows.len() as f64;
        assert!(
            (n - want_n).abs() / want_n < 0.02,
            "{n} flows, expected {want_n}"
        );
    }
}

#[test]
fn poisson_flows_are_sorted_in_window_between_distinct_hosts() {
    let t = traffic(8, Duration::from_millis(20), 3);
    let flows = poisson(&t, 0.3, &Cdf::websearch()).unwrap();
    assert!(flows.len() > 100);
    assert!(flows.windows(2).all(|w| w[0].start <= w[1].start));
    let end = t.start + t.duration;
    let mut dsts = HashSet::new();
    for f in &flows {
        assert_ne!(f.src, f.dst);
        assert!(f.src.0 < 8 && f.dst.0 < 8);
        assert!(f.start >= t.start && f.start < end);
        assert_eq!((f.pg, f.dport), (3, 100));
        dsts.insert(f.dst);
    }
    assert_eq!(dsts.len(), 8, "destinations spread over all hosts");
}

#[test]
fn generators_are_deterministic_in_the_seed() {
    let t = traffic(16, Duration::from_millis(10), 42);
    let cdf = Cdf::fb_hadoop();
    assert_eq!(
        poisson(&t, 0.3, &cdf).unwrap(),
        poisson(&t, 0.3, &cdf).unwrap()
    );
    let other = Traffic {
        seed: 43,
        ..t.clone()
    };
    assert_ne!(
        poisson(&t, 0.3, &cdf).unwrap(),
        poisson(&other, 0.3, &cdf).unwrap()
    );
    assert_eq!(
        incast(&t, 0.02, 5, 500_000).unwrap(),
        incast(&t, 0.02, 5, 500_000).unwrap()
    );
    assert_ne!(
        incast(&t, 0.02, 5, 500_000).unwrap(),
        incast(&other, 0.02, 5, 500_000).unwrap()
    );
    assert_eq!(
        permutation(&t, 1000).unwrap(),
        permutation(&t, 1000).unwrap()
    );
    // A host's flows do not depend on the hosts listed after it.
    let fewer = Traffic {
        hosts: t.hosts[..8].to_vec(),
        ..t.clone()
    };
    let host0 = |flows: Vec<FlowSpec>| -> Vec<Instant> {
        flows
            .iter()
            .filter(|f| f.src == NodeId(0))
            .map(|f| f.start)
            .collect()
    };
    assert_eq!(
        host0(poisson(&t, 0.3, &cdf).unwrap()),
        host0(poisson(&fewer, 0.3, &cdf).unwrap())
    );
}

#[test]
fn incast_picks_distinct_senders_other_than_the_receiver() {
    // HPCC's shape on its 320 hosts: 60 senders x 500 KB at 2 % of 320 x 100G.
    let t = traffic(320, Duration::from_millis(20), 9);
    let flows = incast(&t, 0.02, 60, 500_000).unwrap();
    assert_eq!(flows.len() % 60, 0);
    let events: Vec<&[FlowSpec]> = flows.chunks(60).collect();
    for e in &events {
        let receiver = e[0].dst;
        assert!(e.iter().all(|f| f.dst == receiver && f.start == e[0].start));
        let senders: HashSet<NodeId> = e.iter().map(|f| f.src).collect();
        assert_eq!(senders.len(), 60, "senders are distinct");
        assert!(!senders.contains(&receiver));
    }
    // Events per second: 0.02 * 32 Tb/s / (60 * 500 KB * 8 bit) = 2666.7; in 20 ms about 53.
    let want = 0.02 * 320.0 * 100e9 / (60.0 * 500_000.0 * 8.0) * 0.02;
    let n = events.len() as f64;
    assert!(
        (n - want).abs() < 4.0 * want.sqrt(),
        "{n} events, expected about {want}"
    );
    assert!(offered_load(&t, &flows) > 0.01 && offered_load(&t, &flows) < 0.03);
}

#[test]
fn permutation_sends_once_and_receives_once_per_host() {
    for seed in 0..20 {
        let t = traffic(2 + seed as u32, Duration::ZERO, seed);
        let flows = permutation(&t, 2_000_000).unwrap();
        assert_eq!(flows.len(), t.hosts.len());
        let srcs: HashSet<NodeId> = flows.iter().map(|f| f.src).collect();
        let dsts: HashSet<NodeId> = flows.iter().map(|f| f.dst).collect();
        assert_eq!(srcs.len(), t.hosts.len());
        assert_eq!(dsts.len(), t.hosts.len());
        assert!(flows.iter().all(|f| f.src != f.dst && f.start == t.start));
    }
}

#[test]
fn bad_parameters_are_refused() {
    let t = traffic(4, Duration::from_millis(1), 0);
    let cdf = Cdf::websearch();
    let one = Traffic {
        hosts: vec![NodeId(1)],
        ..t.clone()
    };
    let twice = Traffic {
        hosts: vec![NodeId(1), NodeId(1)],
        ..t.clone()
    };
    assert!(matches!(
        poisson(&one, 0.3, &cdf),
        Err(GenerateError::Hosts(_))
    ));
    assert!(matches!(
        poisson(&twice, 0.3, &cdf),
        Err(GenerateError::Hosts(_))
    ));
    for load in [0.0, -0.1, 1.5, f64::NAN] {
        assert!(matches!(
            poisson(&t, load, &cdf),
            Err(GenerateError::BadLoad(_))
        ));
    }
    let dead = Traffic {
        host_rate_bps: 0,
        ..t.clone()
    };
    assert_eq!(poisson(&dead, 0.3, &cdf), Err(GenerateError::ZeroRate));
    assert_eq!(
        incast(&t, 0.02, 4, 1000),
        Err(GenerateError::BadSenders {
            senders: 4,
            others: 3
        })
    );
    assert!(matches!(
        incast(&t, 0.02, 0, 1000),
        Err(GenerateError::BadSenders { .. })
    ));
    assert_eq!(incast(&t, 0.02, 2, 0), Err(GenerateError::ZeroSize));
    assert_eq!(permutation(&t, 0), Err(GenerateError::ZeroSize));
}

/// The expected counts, which callers size memory by before generating, agree with the flows
/// the generators then make (within a few standard deviations of a Poisson count), and refuse
/// what the generators refuse.
#[test]
fn the_expected_counts_match_what_the_generators_make() {
    let t = traffic(16, Duration::from_millis(20), 3);
    for (cdf, load) in [(Cdf::websearch(), 0.5), (Cdf::fb_hadoop(), 0.3)] {
        let want = poisson_expected(&t, load, &cdf).unwrap();
        let got = poisson(&t, load, &cdf).unwrap().len() as f64;
        assert!(want > 100.0, "{want}");
        assert!((got - want).abs() < 5.0 * want.sqrt(), "{got} vs {want}");
    }
    let want = incast_expected(&t, 0.1, 5, 100_000).unwrap();
    let got = incast(&t, 0.1, 5, 100_000).unwrap().len() as f64;
    assert!(want > 100.0, "{want}");
    // Events are Poisson; each is `senders` flows.
    assert!(
        (got - want).abs() < 5.0 * 5.0 * (want / 5.0).sqrt(),
        "{got} vs {want}"
    );
    assert_eq!(
        incast_expected(&t, 0.1, 16, 1000),
        Err(GenerateError::BadSenders {
            senders: 16,
            others: 15
        })
    );
    assert!(matches!(
        poisson_expected(&t, 0.0, &Cdf::websearch()),
        Err(GenerateError::BadLoad(_))
    ));
}
