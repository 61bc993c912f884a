//! The device a process gets, from its environment.
//!
//! `roce exec` sets these variables for the program it runs; a program started by hand with
//! `LD_LIBRARY_PATH` pointing at the library can set them itself. Each process is its own NIC.
//! The NIC's own (`ROCE_VERBS_IP`, `_BACKEND`, `_DEV`, `_MTU`, `_PCAP`, `_SNAPLEN`, `_CC`,
//! `_LINE_RATE`, `_LOSS`, `_BUSY_POLL`, `_NO_GSO`) are [`roce_device::spec`]'s; the library adds
//! what a verbs device is besides its NIC:
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `ROCE_VERBS_STATS` | write the NIC's counters (JSON) to this file when the program closes the device or exits | none |
//! | `ROCE_VERBS_NAME` | the device name (`ibv_devices`, `-d`) | `roce0` |
//! | `ROCE_VERBS_UVERBS` | the device's uverbs name (`ibv_device.dev_name`): its node is `/dev/infiniband/<name>` | `uverbs0` |
//! | `ROCE_VERBS_LOG` | what the NIC logs on the program's stderr: tracing's filter directives (`roce_core=debug`) | `warn` |

use std::path::PathBuf;

use roce_core::Mtu;
pub use roce_device::EnvError;
pub use roce_device::spec::{
    ENV_BACKEND, ENV_BUSY_POLL, ENV_CC, ENV_DEV, ENV_IP, ENV_LINE_RATE, ENV_LOSS, ENV_MTU,
    ENV_NO_GSO, ENV_PCAP, ENV_SNAPLEN,
};

/// See the module table.
pub const ENV_STATS: &str = "ROCE_VERBS_STATS";
/// See the module table.
pub const ENV_NAME: &str = "ROCE_VERBS_NAME";
/// See the module table.
pub const ENV_UVERBS: &str = "ROCE_VERBS_UVERBS";
/// See the module table (read by the log, not part of the device's settings).
pub const ENV_LOG: &str = "ROCE_VERBS_LOG";

/// The device's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSpec {
    /// The NIC: its address, backend, MTU, congestion control and capture.
    pub nic: roce_device::DeviceSpec,
    /// Device name, at most 63 bytes.
    pub name: String,
    /// Counters file.
    pub stats: Option<PathBuf>,
    /// The uverbs device name (`uverbs0`): `ibv_device.dev_name`, the node
    /// `/dev/infiniband/<uverbs>` and `/sys/class/infiniband_verbs/<uverbs>`.
    pub uverbs: String,
}

impl DeviceSpec {
    /// Reads the settings through `get` (the process environment in the library, a map in
    /// tests). `Ok(None)`: no address given, so no device.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, EnvError> {
        let Some(nic) = roce_device::DeviceSpec::from_env(&get)? else {
            return Ok(None);
        };
        let name = get(ENV_NAME).unwrap_or_else(|| "roce0".to_owned());
        let name_ok = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
        if name.is_empty() || name.len() >= crate::abi::SYSFS_NAME_MAX || !name.chars().all(name_ok)
        {
            let expected = "1 to 63 letters, digits, '_', '-' or '.'";
            return Err(EnvError::new(ENV_NAME, name, expected));
        }
        let uverbs = get(ENV_UVERBS).unwrap_or_else(|| "uverbs0".to_owned());
        if !uverbs
            .strip_prefix("uverbs")
            .is_some_and(|n| !n.is_empty() && n.len() <= 4 && n.bytes().all(|b| b.is_ascii_digit()))
        {
            let expected = "uverbsN, N a number such as 0";
            return Err(EnvError::new(ENV_UVERBS, uverbs, expected));
        }
        Ok(Some(Self {
            nic,
            name,
            stats: get(ENV_STATS).filter(|p| !p.is_empty()).map(PathBuf::from),
            uverbs,
        }))
    }

    /// The port's active MTU (1024 unless `ROCE_VERBS_MTU` says otherwise).
    pub fn mtu(&self) -> Mtu {
        self.nic.mtu.unwrap_or(Mtu::Mtu1024)
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
        assert_eq!(spec(&[(ENV_NAME, "x"), (ENV_MTU, "4096")]), Ok(None));
    }

    #[test]
    fn defaults_are_roce0_uverbs0_mtu_1024_no_stats() {
        let s = spec(&[(ENV_IP, "127.0.0.2")]).unwrap().unwrap();
        assert_eq!(s.nic.ip, std::net::IpAddr::from([127, 0, 0, 2]));
        assert_eq!((s.name.as_str(), s.uverbs.as_str()), ("roce0", "uverbs0"));
        assert_eq!((s.mtu(), s.stats), (Mtu::Mtu1024, None));
    }

    #[test]
    fn the_nics_variables_are_read_too() {
        let s = spec(&[(ENV_IP, "::1"), (ENV_MTU, "4096"), (ENV_CC, "dcqcn")])
            .unwrap()
            .unwrap();
        assert_eq!((s.mtu(), s.nic.cc), (Mtu::Mtu4096, roce_device::Cc::Dcqcn));
    }

    #[test]
    fn every_bad_value_names_its_variable() {
        for (vars, var) in [
            (&[(ENV_IP, "localhost")][..], ENV_IP),
            (&[(ENV_IP, "1.2.3.4"), (ENV_MTU, "1500")][..], ENV_MTU),
            (
                &[(ENV_IP, "1.2.3.4"), (ENV_NAME, &"x".repeat(64))][..],
                ENV_NAME,
            ),
            (&[(ENV_IP, "1.2.3.4"), (ENV_NAME, "a\"b")][..], ENV_NAME),
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
