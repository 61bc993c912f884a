//! Whether the memory regions a tool is about to register fit this machine, checked before
//! anything is allocated, so that a size typed by mistake gets a sentence rather than an abort
//! of the process.

/// Refuses `bytes` of memory regions for `what` when they exceed the NIC's region limit or the
/// memory this machine has available (Linux: `MemAvailable` of /proc/meminfo; elsewhere only the
/// region limit is checked).
pub(crate) fn check_regions(what: &str, bytes: u128, largest: u128) -> anyhow::Result<()> {
    let limit = roce_core::NicConfig::default().max_mr_size as u128;
    if largest > limit {
        anyhow::bail!(
            "{what} needs a memory region of {} bytes ({}), more than the {} bytes ({}) the NIC \
             registers in one region: lower the size or the count",
            largest,
            iec(largest),
            limit,
            iec(limit)
        );
    }
    if let Some(available) = available_bytes()
        && bytes > available
    {
        anyhow::bail!(
            "{what} needs {} of memory regions and this machine has {} available: lower the size or the count",
            iec(bytes),
            iec(available)
        );
    }
    Ok(())
}

/// `MemAvailable` in bytes, where the kernel reports it.
fn available_bytes() -> Option<u128> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&meminfo)
}

fn parse_mem_available(meminfo: &str) -> Option<u128> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Bytes in binary units: `256 GiB`, `1.5 MiB`.
fn iec(bytes: u128) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    let text = format!("{value:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text} {}", units[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_kib() {
        let meminfo =
            "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   23000000 kB\n";
        assert_eq!(parse_mem_available(meminfo), Some(23_000_000 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn a_region_over_the_nics_limit_is_refused_with_its_size() {
        let err = check_regions("roce demo", 512 << 30, 256 << 30).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("256 GiB"), "{text}");
        assert!(check_regions("roce demo", 1 << 20, 1 << 19).is_ok());
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(iec(256 << 30), "256 GiB");
        assert_eq!(iec(1536 << 10), "1.5 MiB");
        assert_eq!(iec(100), "100 B");
        assert_eq!(iec((256 << 30) + 4096), "256 GiB");
    }
}
