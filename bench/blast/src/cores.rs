//! `roce-blast cores`: how far apart two CPUs are, over time — the round trip of one cache line
//! between a thread pinned on each, sampled every few milliseconds.
//!
//! On a virtual machine the host may run the two vCPUs on cores that share a last-level cache or
//! on cores that do not, and move them between the two while a benchmark runs. Every hand-over
//! between two processes (a veth's packets, a socket's wake-ups, a freed buffer) then costs
//! several times more for seconds at a time: on the AMD EPYC guest of docs/benchmarks.md the
//! round trip reads 50–65 ns or 300–350 ns, rarely between, and a `roce perf write` run over a
//! veth in the far state moved about half the bytes per second with nothing else changed. The
//! bench scripts sample this beside their cells, so that a cell measured in the far state is
//! told apart from a change in the code (bench/lib.sh, `steady`).

use std::hint::spin_loop;
use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use nix::sched::{CpuSet, sched_setaffinity};
use nix::unistd::Pid;

/// Round trips not timed before each sample: the partner thread's wake-up is not the line's.
const WARM_UP: u32 = 100;

/// The line the two threads pass between them: 1 from `a`, 0 back from `b`. Aligned to its own
/// cache line, so that nothing else shares it.
#[repr(align(128))]
struct Line(AtomicU32);

/// Pins the calling thread on `cpu`.
fn pin(cpu: usize) -> anyhow::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu).with_context(|| format!("CPU {cpu}"))?;
    sched_setaffinity(Pid::from_raw(0), &set)
        .with_context(|| format!("pinning a thread on CPU {cpu}"))
}

/// Samples the round trip between CPUs `a` and `b`: every `every`, `round_trips` of them timed
/// on `a`; prints "unix_ms ns_per_round_trip" per sample, `samples` times (0: until killed).
pub(crate) fn run(
    (a, b): (usize, usize),
    round_trips: u32,
    every: Duration,
    samples: u64,
) -> anyhow::Result<()> {
    pin(a)?;
    let line = Arc::new(Line(AtomicU32::new(0)));
    let start = Arc::new(Barrier::new(2));
    let (pinned_tx, pinned) = std::sync::mpsc::channel();
    {
        let (line, start) = (Arc::clone(&line), Arc::clone(&start));
        let total = WARM_UP + round_trips;
        std::thread::Builder::new()
            .name("cores-b".into())
            .spawn(move || -> anyhow::Result<()> {
                // Told before anything waits on it: a CPU that is not there ends the run.
                let _ = pinned_tx.send(pin(b));
                loop {
                    start.wait();
                    for _ in 0..total {
                        while line.0.load(Ordering::Acquire) != 1 {
                            spin_loop();
                        }
                        line.0.store(0, Ordering::Release);
                    }
                }
            })
            .context("starting the thread on the second CPU")?;
    }
    pinned
        .recv()
        .context("the second CPU's thread ended before pinning itself")??;
    let out = std::io::stdout();
    let mut taken = 0u64;
    while samples == 0 || taken < samples {
        start.wait();
        let trip = || {
            line.0.store(1, Ordering::Release);
            while line.0.load(Ordering::Acquire) != 0 {
                spin_loop();
            }
        };
        (0..WARM_UP).for_each(|_| trip());
        let timed = Instant::now();
        (0..round_trips).for_each(|_| trip());
        let ns = timed.elapsed().as_nanos() as f64 / f64::from(round_trips.max(1));
        let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis();
        let mut out = out.lock();
        writeln!(out, "{unix_ms} {ns:.1}")?;
        out.flush()?;
        taken += 1;
        std::thread::sleep(every);
    }
    Ok(())
}
