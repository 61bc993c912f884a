//! The `[switch.ecn]` and `[switch.pfc]` tables (and `[network.ecn]`, `[network.pfc]` of a
//! network scenario): RED ECN marking and PFC thresholds, checked.

use anyhow::bail;
use serde::Deserialize;

use crate::EcnMarking;
use crate::switch::Pfc;

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
    /// `false`: no PFC, a lossy fabric, with the other keys checked but unused (but a shared
    /// buffer's `alpha_shift`, which also bounds what a port may take before drops). So that a
    /// sweep can take PFC off: `"network.pfc.enabled" = [true, false]`.
    #[serde(default = "default_enabled")]
    enabled: bool,
    /// Static thresholds; with a shared buffer they are dynamic and these must not be set.
    xoff_bytes: Option<usize>,
    xon_bytes: Option<usize>,
    /// With a shared buffer: a port pauses when its share passes the free space `>>` this.
    pub(super) alpha_shift: Option<u8>,
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
    /// PFC, checked; `key` names the table in errors. With a `shared` buffer the thresholds
    /// are dynamic (`alpha_shift`), otherwise `xoff_bytes` and `xon_bytes` give them. `None`
    /// when the table says `enabled = false`.
    pub(super) fn pfc(&self, key: &str, shared: bool) -> anyhow::Result<Option<Pfc>> {
        let (xoff_bytes, xon_bytes) = match (shared, self.xoff_bytes, self.xon_bytes) {
            (true, None, None) => (0, 0),
            (true, _, _) => bail!(
                "{key}: xoff_bytes and xon_bytes are static thresholds, but the buffer is \
                 shared (network.shared_buffer = true), whose thresholds are dynamic: remove \
                 them (alpha_shift sets how much of the free space a port may take)"
            ),
            (false, Some(xoff), Some(xon)) => (xoff, xon),
            (false, _, _) => bail!("{key}: needs xoff_bytes and xon_bytes"),
        };
        if !shared && self.alpha_shift.is_some() {
            bail!("{key}.alpha_shift: only with a shared buffer (network.shared_buffer = true)");
        }
        if self.alpha_shift.is_some_and(|a| a > 16) {
            bail!("{key}.alpha_shift: from 0 (all the free space) to 16");
        }
        if xon_bytes > xoff_bytes {
            bail!("{key}: xon_bytes {xon_bytes} is above xoff_bytes {xoff_bytes}");
        }
        let mut priorities = 0u8;
        for &prio in &self.priorities {
            if prio > 7 {
                bail!("{key}.priorities: {prio} is not a priority (0 to 7)");
            }
            priorities |= 1 << prio;
        }
        Ok(self.enabled.then_some(Pfc {
            xoff_bytes,
            xon_bytes,
            pause_quanta: self.pause_quanta,
            priorities,
        }))
    }
}

fn default_enabled() -> bool {
    true
}

fn default_priorities() -> Vec<u8> {
    vec![3]
}

fn default_quanta() -> u16 {
    0xffff
}
