//! The device a process gets, from its environment.
//!
//! `roce exec` sets these variables for the program it runs; a program started by hand with
//! `LD_LIBRARY_PATH` pointing at the library can set them itself. Each process is its own NIC.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `ROCE_VERBS_IP` | the NIC's IPv4 or IPv6 address: its GID 1 (`::ffff:a.b.c.d` for IPv4, the address itself for IPv6), its UDP socket | none: no device is listed |
//! | `ROCE_VERBS_BACKEND` | `udp` (unprivileged socket on port 4791) or `raw` (frames on `ROCE_VERBS_DEV`) | `udp` |
//! | `ROCE_VERBS_DEV` | interface of the raw backend | none |
//! | `ROCE_VERBS_MTU` | the port's active (path) MTU: 256, 512, 1024, 2048 or 4096 | 1024, rxe's on a 1500-byte netdev |
//! | `ROCE_VERBS_PCAP` | write the NIC's packets to this pcap | none |
//! | `ROCE_VERBS_SNAPLEN` | keep at most this many bytes of each packet in the pcap (tcpdump's `-s`; 0: whole packets) | 0 |
//! | `ROCE_VERBS_STATS` | write the NIC's counters (JSON) to this file when the program closes the device or exits | none |
//! | `ROCE_VERBS_NAME` | the device name (`ibv_devices`, `-d`) | `roce0` |
//! | `ROCE_VERBS_CC` | congestion control: `none`, `dcqcn` (NVIDIA's defaults) or `dcqcn-paper` | `none` |
//! | `ROCE_VERBS_LINE_RATE` | the port's line rate in Gb/s (where DCQCN starts) | 100 |
//! | `ROCE_VERBS_LOSS` | drop this fraction (0 to 1) of received datagrams | 0 |
//! | `ROCE_VERBS_BUSY_POLL` | `1`: the NIC's thread never sleeps (one busy core, lower latency) | `0` |
//! | `ROCE_VERBS_NO_GSO` | `1`: the UDP backend sends one datagram per system call | `0` |
//! | `ROCE_VERBS_UVERBS` | the device's uverbs name (`ibv_device.dev_name`): its node is `/dev/infiniband/<name>` | `uverbs0` |

use std::fmt;
use std::net::IpAddr;
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
pub const ENV_SNAPLEN: &str = "ROCE_VERBS_SNAPLEN";
/// See the module table.
pub const ENV_STATS: &str = "ROCE_VERBS_STATS";
/// See the module table.
pub const ENV_NAME: &str = "ROCE_VERBS_NAME";
/// See the module table.
pub const ENV_CC: &str = "ROCE_VERBS_CC";
/// See the module table.
pub const ENV_LINE_RATE: &str = "ROCE_VERBS_LINE_RATE";
/// See the module table.
pub const ENV_LOSS: &str = "ROCE_VERBS_LOSS";
/// See the module table.
pub const ENV_BUSY_POLL: &str = "ROCE_VERBS_BUSY_POLL";
/// See the module table.
pub const ENV_NO_GSO: &str = "ROCE_VERBS_NO_GSO";
/// See the module table.
pub const ENV_UVERBS: &str = "ROCE_VERBS_UVERBS";

/// Congestion control on every QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cc {
    /// None, as rxe.
    None,
    /// DCQCN with NVIDIA's ConnectX defaults.
    Dcqcn,
    /// DCQCN with the SIGCOMM 2015 paper's parameters.
    DcqcnPaper,
}

/// How the NIC reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A UDP socket on `<ip>:4791`.
    Udp,
    /// Whole frames on an interface (CAP_NET_RAW).
    Raw,
}

/// The device's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSpec {
    /// Device name, at most 63 bytes.
    pub name: String,
    /// The NIC's address, IPv4 or IPv6.
    pub ip: IpAddr,
    /// Backend.
    pub backend: Backend,
    /// Raw backend interface.
    pub dev: Option<String>,
    /// Active MTU of port 1.
    pub mtu: Mtu,
    /// Capture file.
    pub pcap: Option<PathBuf>,
    /// Bytes of each packet the capture keeps (0: whole packets).
    pub snaplen: u32,
    /// Counters file.
    pub stats: Option<PathBuf>,
    /// Congestion control.
    pub cc: Cc,
    /// Line rate, bits per second.
    pub line_rate_bps: u64,
    /// Fraction of received datagrams dropped.
    pub loss: f64,
    /// The NIC's thread never sleeps.
    pub busy_poll: bool,
    /// No UDP segmentation offload.
    pub no_gso: bool,
    /// The uverbs device name (`uverbs0`): `ibv_device.dev_name`, the node
    /// `/dev/infiniband/<uverbs>` and `/sys/class/infiniband_verbs/<uverbs>`.
    pub uverbs: String,
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
        let ip: IpAddr = ip.trim().parse().map_err(|_| {
            bad(
                ENV_IP,
                ip.clone(),
                "an IPv4 or IPv6 address such as 127.0.0.1 or ::1",
            )
        })?;
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
        let cc = match get(ENV_CC).as_deref() {
            None | Some("none") => Cc::None,
            Some("dcqcn") => Cc::Dcqcn,
            Some("dcqcn-paper") => Cc::DcqcnPaper,
            Some(other) => return Err(bad(ENV_CC, other.to_owned(), "none, dcqcn or dcqcn-paper")),
        };
        let line_rate_bps = match get(ENV_LINE_RATE) {
            None => 100_000_000_000,
            Some(r) => match r.trim().parse::<f64>() {
                Ok(g) if g > 0.0 && g <= 10_000.0 => (g * 1e9) as u64,
                _ => return Err(bad(ENV_LINE_RATE, r, "Gb/s, above 0 and at most 10000")),
            },
        };
        let loss = match get(ENV_LOSS) {
            None => 0.0,
            Some(l) => match l.trim().parse::<f64>() {
                Ok(f) if (0.0..=1.0).contains(&f) => f,
                _ => return Err(bad(ENV_LOSS, l, "a fraction from 0 to 1")),
            },
        };
        let flag = |var: &'static str| match get(var).as_deref() {
            None | Some("0") | Some("") => Ok(false),
            Some("1") => Ok(true),
            Some(other) => Err(bad(var, other.to_owned(), "0 or 1")),
        };
        let snaplen = match get(ENV_SNAPLEN) {
            None => 0,
            Some(s) => s
                .trim()
                .parse::<u32>()
                .map_err(|_| bad(ENV_SNAPLEN, s, "bytes, or 0 for whole packets"))?,
        };
        let busy_poll = flag(ENV_BUSY_POLL)?;
        let no_gso = flag(ENV_NO_GSO)?;
        let uverbs = get(ENV_UVERBS).unwrap_or_else(|| "uverbs0".to_owned());
        if !uverbs
            .strip_prefix("uverbs")
            .is_some_and(|n| !n.is_empty() && n.len() <= 4 && n.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(bad(ENV_UVERBS, uverbs, "uverbsN, N a number such as 0"));
        }
        Ok(Some(Self {
            uverbs,
            cc,
            line_rate_bps,
            loss,
            busy_poll,
            no_gso,
            name,
            ip,
            backend,
            dev,
            mtu,
            pcap: get(ENV_PCAP).filter(|p| !p.is_empty()).map(PathBuf::from),
            snaplen,
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
        assert_eq!(s.ip, IpAddr::from([127, 0, 0, 2]));
        assert_eq!(s.backend, Backend::Udp);
        assert_eq!(s.mtu, Mtu::Mtu1024);
        assert_eq!(s.name, "roce0");
        assert_eq!(s.uverbs, "uverbs0");
        assert_eq!((s.pcap, s.snaplen), (None, 0));
        assert_eq!(
            (s.cc, s.line_rate_bps, s.loss, s.busy_poll),
            (Cc::None, 100_000_000_000, 0.0, false)
        );
    }

    #[test]
    fn an_ipv6_address_is_taken() {
        let s = spec(&[(ENV_IP, " ::1 ")]).unwrap().unwrap();
        assert_eq!(s.ip, IpAddr::from(std::net::Ipv6Addr::LOCALHOST));
        let s = spec(&[(ENV_IP, "fd00:198:18::2")]).unwrap().unwrap();
        assert_eq!(s.ip.to_string(), "fd00:198:18::2");
    }

    #[test]
    fn device_tool_options_parse() {
        let s = spec(&[
            (ENV_IP, "127.0.0.2"),
            (ENV_CC, "dcqcn"),
            (ENV_LINE_RATE, "25"),
            (ENV_LOSS, "0.01"),
            (ENV_BUSY_POLL, "1"),
            (ENV_SNAPLEN, "128"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(s.snaplen, 128);
        assert_eq!(
            (s.cc, s.line_rate_bps, s.loss, s.busy_poll),
            (Cc::Dcqcn, 25_000_000_000, 0.01, true)
        );
    }

    #[test]
    fn every_bad_value_names_its_variable() {
        for (vars, var) in [
            (&[(ENV_IP, "localhost")][..], ENV_IP),
            (&[(ENV_IP, "::1/128")][..], ENV_IP),
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
            (&[(ENV_IP, "1.2.3.4"), (ENV_CC, "reno")][..], ENV_CC),
            (&[(ENV_IP, "1.2.3.4"), (ENV_LOSS, "1.5")][..], ENV_LOSS),
            (&[(ENV_IP, "1.2.3.4"), (ENV_SNAPLEN, "-1")][..], ENV_SNAPLEN),
            (
                &[(ENV_IP, "1.2.3.4"), (ENV_LINE_RATE, "0")][..],
                ENV_LINE_RATE,
            ),
            (
                &[(ENV_IP, "1.2.3.4"), (ENV_BUSY_POLL, "yes")][..],
                ENV_BUSY_POLL,
            ),
            (&[(ENV_IP, "1.2.3.4"), (ENV_UVERBS, "../x")][..], ENV_UVERBS),
            (
                &[(ENV_IP, "1.2.3.4"), (ENV_UVERBS, "uverbs")][..],
                ENV_UVERBS,
            ),
        ] {
            assert_eq!(spec(vars).unwrap_err().var, var, "{vars:?}");
        }
    }
}
