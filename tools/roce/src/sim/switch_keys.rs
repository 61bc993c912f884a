//! The `[switch.ecn]` and `[switch.pfc]` tables (and `[network.ecn]`, `[network.pfc]` of a
//! network scenario): RED ECN marking and PFC thresholds, checked.

use anyhow::bail;
use roce_sim::EcnMarking;
use roce_sim::switch::Pfc;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EcnFile {
    kmin_bytes: usize,
    kmax_bytes: usize,
    pmax: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PfcFile {
    xoff_bytes: usize,
    xon_bytes: usize,
    /// Priorities PFC applies to; default: priority 3 alone.
    #[serde(default = "default_priorities")]
    priorities: Vec<u8>,
    /// Pause time per PAUSE frame, quanta of 512 bit times.
    #[serde(default = "default_quanta")]
    pause_quanta: u16,
}

impl EcnFile {
    /// The marking, checked; `key` names the table in errors.
    pub(super) fn marking(&self, key: &str) -> anyhow::Result<EcnMarking> {
        if !(0.0..=1.0).contains(&self.pmax) {
            bail!("{key}.pmax = {}: from 0 to 1", self.pmax);
        }
        if self.kmin_bytes > self.kmax_bytes {
            bail!(
                "{key}: kmin_bytes {} is above kmax_bytes {}",
                self.kmin_bytes,
                self.kmax_bytes
            );
        }
        Ok(EcnMarking {
            k_min_bytes: self.kmin_bytes,
            k_max_bytes: self.kmax_bytes,
            p_max: self.pmax,
        })
    }
}

impl PfcFile {
    /// PFC, checked; `key` names the table in errors.
    pub(super) fn pfc(&self, key: &str) -> anyhow::Result<Pfc> {
        if self.xon_bytes > self.xoff_bytes {
            bail!(
                "{key}: xon_bytes {} is above xoff_bytes {}",
                self.xon_bytes,
                self.xoff_bytes
            );
        }
        let mut priorities = 0u8;
        for &prio in &self.priorities {
            if prio > 7 {
                bail!("{key}.priorities: {prio} is not a priority (0 to 7)");
            }
            priorities |= 1 << prio;
        }
        Ok(Pfc {
            xoff_bytes: self.xoff_bytes,
            xon_bytes: self.xon_bytes,
            pause_quanta: self.pause_quanta,
            priorities,
        })
    }
}

fn default_priorities() -> Vec<u8> {
    vec![3]
}

fn default_quanta() -> u16 {
    0xffff
}
