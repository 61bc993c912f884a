//! `roce-blast cores`: one line per sample, each a timestamp and a round trip that a cache line
//! between two CPUs can take; a machine of one CPU is told, not sampled.

use std::process::Command;

fn cores(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_roce-blast"))
        .arg("cores")
        .args(args)
        .output()
        .expect("run roce-blast cores")
}

#[test]
fn each_sample_is_a_time_and_a_round_trip_between_the_two_cpus() {
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        eprintln!("SKIP: one CPU here, and the sampler needs two");
        return;
    }
    let out = cores(&["--samples", "3", "--every-ms", "1", "--round-trips", "500"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let samples: Vec<(u128, f64)> = text
        .lines()
        .map(|line| {
            let (ms, ns) = line.split_once(' ').expect("two fields");
            (ms.parse().unwrap(), ns.parse().unwrap())
        })
        .collect();
    assert_eq!(samples.len(), 3, "{text}");
    for pair in samples.windows(2) {
        assert!(pair[0].0 <= pair[1].0, "times in order: {text}");
    }
    // A line's round trip between two cores is tens of nanoseconds at least, and far below a
    // millisecond unless the host stopped a vCPU for the whole sample.
    for (_, ns) in &samples {
        assert!(*ns > 1.0 && *ns < 1e6, "{text}");
    }
}

#[test]
fn a_cpu_that_is_not_there_is_refused_with_its_number() {
    let out = cores(&["--samples", "1", "--cpus", "0,4095"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no sample before the refusal");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CPU 4095"), "{err}");
}
