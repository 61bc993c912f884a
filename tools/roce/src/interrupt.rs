//! Ctrl-C during a long run (`roce sim`, its sweeps, `roce switch`): a flag the run looks at,
//! so that it stops where it is and says what it did, rather than the process dying with
//! nothing written. A second Ctrl-C ends the process at once (while the outputs are written,
//! say).

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use signal_hook::consts::{SIGINT, SIGTERM};

/// Whether a Ctrl-C (or SIGTERM) asked the run to stop.
#[derive(Debug, Clone)]
pub(crate) struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// Catches SIGINT and SIGTERM from now on: the first sets the flag, a second (with the flag
    /// set) takes the signal's default action.
    pub(crate) fn catch() -> anyhow::Result<Self> {
        let asked = Arc::new(AtomicBool::new(false));
        for signal in [SIGINT, SIGTERM] {
            // In this order: the conditional default sees the flag before the second sets it.
            signal_hook::flag::register_conditional_default(signal, Arc::clone(&asked))
                .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&asked)))
                .context("cannot catch Ctrl-C")?;
        }
        Ok(Self(asked))
    }

    /// Whether the run was asked to stop.
    pub(crate) fn asked(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// What a run's observer answers: go on, or stop here.
    pub(crate) fn control(&self) -> ControlFlow<()> {
        if self.asked() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}
