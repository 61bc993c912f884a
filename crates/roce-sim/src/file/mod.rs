//! Scenario files, the TOML that `roce sim` plays: read and checked into the simulator's types
//! ([`scenario`]: hosts on one switch; [`network`]: a multi-switch topology), with the
//! `--set KEY=VALUE` [`overrides`] both apply and the [`grid`]s of sweeps.

mod cc_tables;
pub mod grid;
pub mod network;
pub mod overrides;
pub mod scenario;
mod switch_keys;

/// Why a scenario file, an override or a grid was refused: its text names the file and the key
/// it is about, then the causes, `: `-separated ("s.toml: not a valid scenario: hosts = 1: from
/// 2 to 254 …").
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct FileError(anyhow::Error);
