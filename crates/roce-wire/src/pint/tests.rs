use super::*;

/// run.py's `--pint_log_base 1.01`.
const BASE: f64 = 1.01;

#[test]
fn the_encoding_is_exact_in_expectation_over_its_draws() {
    // Over every draw, the decoded values average to ⌈u·512⌉/512 exactly: the random rounding
    // is the linear interpolation between the two steps around it.
    for u in [0.003, 0.1, 0.5, 0.95, 1.0, 1.37, 7.9] {
        let units = (u * MAX_CONCURRENT).ceil();
        let mean = (0..=u16::MAX)
            .map(|draw| decode(encode(u, BASE, draw), BASE))
            .sum::<f64>()
            / 65536.0;
        let rel = (mean * MAX_CONCURRENT - units).abs() / units;
        assert!(rel < 1e-4, "u {u}: mean {mean} against {}", units / 512.0);
        // Each draw gives one of the two steps around it.
        let lo = decode(encode(u, BASE, u16::MAX), BASE) * MAX_CONCURRENT;
        let hi = decode(encode(u, BASE, 0), BASE) * MAX_CONCURRENT;
        assert!(
            lo <= units + 1e-9 && units <= hi * (1.0 + 1e-9),
            "{lo} {units} {hi}"
        );
        assert!(hi / lo <= BASE * (1.0 + 1e-9));
    }
}

#[test]
fn no_utilisation_is_the_value_zero_and_the_scale_is_logarithmic() {
    assert_eq!(encode(0.0, BASE, 0), 0);
    assert_eq!(decode(0, BASE), 1.0 / 512.0);
    // 11 bits hold ns-3's largest value at 1.01 (log(512²) / log(1.01) = 1254).
    assert!(encode(512.0, BASE, 0) <= 1254);
    // At 1.05 a link at 95 % is ln(487)/ln(1.05) = 126.8: 126 or 127.
    assert!(matches!(encode(0.95, 1.05, 0), 126 | 127));
}

/// 1000-byte packets leaving back to back at 100 Gb/s (80 ns each), T = 13 µs.
fn at_line_rate(meter: &mut Meter, queue: u64, packets: u64, from_ns: u64) -> f64 {
    let mut u = 0.0;
    for i in 0..packets {
        let now = from_ns + i * 80;
        u = meter.update(now, queue, 100_000_000_000, 13_000);
        meter.departed(now, 1000);
    }
    u
}

#[test]
fn a_busy_port_reads_one_plus_its_queue_over_the_bdp() {
    // The fixed point of U = q·dt/(B·T²) + last/(B·T) + U·(T − dt)/T is q/(B·T) + last/(B·dt):
    // 1 at line rate with no queue, 2 with a BDP (162 500 bytes) queued.
    let mut meter = Meter::default();
    let u = at_line_rate(&mut meter, 0, 2000, 1_000);
    assert!((u - 1.0).abs() < 0.01, "{u}");
    let u = at_line_rate(&mut meter, 162_500, 2000, 1_000_000);
    assert!((u - 2.0).abs() < 0.02, "{u}");
    // A queue under one 256-byte unit counts as none.
    let mut small = Meter::default();
    let mut none = Meter::default();
    assert_eq!(
        at_line_rate(&mut small, 255, 50, 0),
        at_line_rate(&mut none, 0, 50, 0)
    );
}

#[test]
fn after_an_idle_t_only_the_last_packet_counts() {
    let mut meter = Meter::default();
    at_line_rate(&mut meter, 162_500, 500, 0);
    assert!(meter.utilisation() > 1.5);
    // 20 µs later (more than T): the old U is gone, the last packet is 1000 B over a BDP.
    let u = meter.update(60_000, 0, 100_000_000_000, 13_000);
    assert!((u - 1000.0 / 162_500.0).abs() < 1e-12, "{u}");
}

#[test]
fn the_table_encodes_as_the_formula_does() {
    for base in [1.01, 1.05, 1.001] {
        let scale = Scale::new(base);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Utilisations across the table's range and past it, every draw's region.
            let u =
                (x >> 11) as f64 / (1u64 << 53) as f64 * 10.0 * if i % 7 == 0 { 3.0 } else { 1.0 };
            let draw = (x >> 3) as u16;
            assert_eq!(
                scale.encode(u, draw),
                encode(u, base, draw),
                "u {u} base {base}"
            );
        }
        // Every whole number of units, at the draws that split them.
        for units in 1..=Scale::TABLE_UNITS + 10 {
            let u = units as f64 / MAX_CONCURRENT;
            for draw in [0, 1, 32_768, u16::MAX] {
                assert_eq!(
                    scale.encode(u, draw),
                    encode(u, base, draw),
                    "{units} {base}"
                );
            }
        }
    }
}
