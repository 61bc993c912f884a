//! The only clock of roce-emu: tokio's, mapped onto `roce_core::Instant`, so device tests can
//! pause and advance it (`tokio::time::pause`).

use roce_core::Instant;

/// Nanoseconds since the device started, from tokio's clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TokioClock {
    start: tokio::time::Instant,
}

impl TokioClock {
    pub(crate) fn new() -> Self {
        Self {
            start: tokio::time::Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Instant {
        let elapsed = self.start.elapsed().as_nanos();
        Instant::from_nanos(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }

    /// The tokio instant of an engine deadline.
    pub(crate) fn to_tokio(self, at: Instant) -> tokio::time::Instant {
        self.start + std::time::Duration::from_nanos(at.as_nanos())
    }
}
