//! The device a process gets, from its environment.
//!
//! `roce exec` sets these variables for the program it runs; a program started by hand with
//! `LD_LIBRARY_PATH` pointing at the library can set them itself. Each process is its own NIC.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `ROCE_VERBS_IP` | the NIC's IPv4 address: its GID `::ffff:a.b.c.d`, its UDP socket | none: no device is listed |
//! | `ROCE_VERBS_BACKEND` | `udp` (unprivileged socket on port 4791) or `raw` (frames on `ROCE_VERBS_DEV`) | `udp` |
//! | `ROCE_VERBS_DEV` | interface of the raw backend | none |
//! | `ROCE_VERBS_MTU` | the port's active (path) MTU: 256, 512, 1024, 2048 or 4096 | 1024, rxe's on a 1500-byte netdev |
//! | `ROCE_VERBS_PCAP` | write the NIC's packets to this pcap | none |
//! | `ROCE_VERBS_STATS` | write the NIC's counters (JSON) to this file when the program closes the device or exits | none |
//! | `ROCE_VERBS_NAME` | the device name (`ibv_devices`, `-d`) | `roce0` |

use std::fmt;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use roce_core::Mtu;

/// The environment variables read, in the order of the table above.
pub const ENV_IP: &str = "ROCE_VERBS_IP";
/// See the module table.
pub const ENV_BACKEND: &str = "ROCE_VERBS_BACKEND";
/// See the module table.
pub const ENV_DEV: &str = "ROCE_VERBS_DEV";
/// See the module table.
pub const ENV_MTU: &str = "ROCE_VERBS_MTU";
/// See the module table.
pub const ENV_PCAP: &str = "ROCE_VERBS_PCAP";
/// See the module table.
pub const ENV_STATS: &str = "ROCE_VERBS_STATS";
/// See the module table.
pub const ENV_NAME: &str = "ROCE_VERBS_NAME";

/// How the NIC reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A UDP socket on `<ip>:4791`.
    Udp,
    /// Whole frames on an interface (CAP_NET_RAW).
    Raw,
}

/// The device's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSpec {
    /// Device name, at most 63 bytes.
    pub name: String,
    /// The NIC's address.
    pub ip: Ipv4Addr,
    /// Backend.
    pub backend: Backend,
    /// Raw backend interface.
    pub dev: Option<String>,
    /// Active MTU of port 1.
    pub mtu: Mtu,
    /// Capture file.
    pub pcap: Option<PathBuf>,
    /// Counters file.
    pub stats: Option<PathBuf>,
}

/// A variable that does not parse. The library prints it once on stderr and
/// `ibv_get_device_list` fails with `EINVAL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What it should be.
    pub expected: &'static str,
}

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?}: expected {}",
            self.var, self.value, self.expected
        )
    }
}

impl std::error::Error for EnvError {}

impl DeviceSpec {
    /// Reads the settings through `get` (the process environment in the library, a map in
    /// tests). `Ok(None)`: no address given, so no device.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, EnvError> {
        let bad = |var, value: String, expected| EnvError {
            var,
            value,
            expected,
        };
        let Some(ip) = get(ENV_IP) else {
            return Ok(None);
        };
        let ip: Ipv4Addr = ip
            .trim()
            .parse()
            .map_err(|_| bad(ENV_IP, ip.clone(), "an IPv4 address such as 127.0.0.1"))?;
        let backend = match get(ENV_BACKEND).as_deref() {
            None | Some("udp") => Backend::Udp,
            Some("raw") => Backend::Raw,
            Some(other) => return Err(bad(ENV_BACKEND, other.to_owned(), "udp or raw")),
        };
        let dev = get(ENV_DEV).filter(|d| !d.is_empty());
        if backend == Backend::Raw && dev.is_none() {
            return Err(bad(
                ENV_DEV,
                String::new(),
                "an interface name (the raw backend needs one)",
            ));
        }
        let mtu = match get(ENV_MTU) {
            None => Mtu::Mtu1024,
            Some(m) => m
                .trim()
                .parse::<u32>()
                .ok()
                .and_then(Mtu::from_bytes)
                .ok_or_else(|| bad(ENV_MTU, m.clone(), "256, 512, 1024, 2048 or 4096"))?,
        };
        let name = get(ENV_NAME).unwrap_or_else(|| "roce0".to_owned());
        let name_ok = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
        if name.is_empty() || name.len() >= crate::abi::SYSFS_NAME_MAX || !name.chars().all(name_ok)
        {
            return Err(bad(
                ENV_NAME,
                name,
                "1 to 63 letters, digits, '_', '-' or '.'",
            ));
        }
        Ok(Some(Self {
            name,
            ip,
            backend,
            dev,
            mtu,
            pcap: get(ENV_PCAP).filter(|p| !p.is_empty()).map(PathBuf::from),
            stats: get(ENV_STATS).filter(|p| !p.is_empty()).map(PathBuf::from),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn spec(vars: &[(&str, &str)]) -> Result<Option<DeviceSpec>, EnvError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        DeviceSpec::from_env(|k| map.get(k).cloned())
    }

    #[test]
    fn no_address_no_device() {
        assert_eq!(spec(&[(ENV_MTU, "4096")]), Ok(None));
    }

    #[test]
    fn defaults_are_udp_mtu_1024_roce0() {
        let s = spec(&[(ENV_IP, "127.0.0.2")]).unwrap().unwrap();
        assert_eq!(s.ip, Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(s.backend, Backend::Udp);
        assert_eq!(s.mtu, Mtu::Mtu1024);
        assert_eq!(s.name, "roce0");
        assert_eq!(s.pcap, None);
    }

    #[test]
    fn every_bad_value_names_its_variable() {
        for (vars, var) in [
            (&[(ENV_IP, "localhost")][..], ENV_IP),
            (&[(ENV_IP, "::1")][..], ENV_IP),
            (&[(ENV_IP, "1.2.3.4"), (ENV_MTU, "1500")][..], ENV_MTU),
            (
                &[(ENV_IP, "1.2.3.4"), (ENV_BACKEND, "tcp")][..],
                ENV_BACKEND,
            ),
            (&[(ENV_IP, "1.2.3.4"), (ENV_BACKEND, "raw")][..], ENV_DEV),
            (
                &[(ENV_IP, "1.2.3.4"), (ENV_NAME, &"x".repeat(64))][..],
                ENV_NAME,
            ),
            (&[(ENV_IP, "1.2.3.4"), (ENV_NAME, "a\"b")][..], ENV_NAME),
        ] {
            assert_eq!(spec(vars).unwrap_err().var, var, "{vars:?}");
        }
    }
}
