//! The NIC's log, on the program's standard error: what the device warns of (a receive buffer
//! capped below what the NIC asks for, a shared address whose datagrams it cannot steer, a
//! socket it cannot wait on) and, when asked, what it traces (a WR that failed and why, a
//! packet dropped). Under `roce exec` the NIC runs inside the program, so the program's
//! standard error is the only place where it can say so.
//!
//! [`ENV_LOG`] holds tracing's filter directives (`warn`,
//! `roce_core=debug`, `roce_core::qp::completer=debug`); unset, the warnings. `roce exec` passes
//! its own `RUST_LOG` on as it. A program that installed a tracing subscriber of its own (a
//! Rust program) keeps it, and the NIC's events go there. One that installs its own only after
//! it opened the device finds ours in place (tracing's `init` then panics, `try_init` returns
//! an error): `off` installs none.

use std::sync::Once;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::ParseError;

use crate::config::ENV_LOG;

/// What is logged when the variable is unset.
const DEFAULT: &str = "warn";

/// Starts the log once per process, from the environment. A value that does not parse is
/// said on stderr, naming the variable, and the warnings are logged.
pub(crate) fn start() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let directives = std::env::var(ENV_LOG).ok();
        if directives.as_deref().map(str::trim) == Some("off") {
            return;
        }
        let filter = filter(directives.as_deref()).unwrap_or_else(|err| {
            eprintln!(
                "roce-verbs: {ENV_LOG}={}: {err}; logging warnings only",
                directives.as_deref().unwrap_or_default()
            );
            EnvFilter::new(DEFAULT)
        });
        // Fails only where the program has a subscriber of its own, which then gets the events.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init();
    });
}

/// The filter that `directives` (the variable's value, if set) asks for.
fn filter(directives: Option<&str>) -> Result<EnvFilter, ParseError> {
    EnvFilter::builder().parse(directives.unwrap_or(DEFAULT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::level_filters::LevelFilter;

    #[test]
    fn unset_logs_the_warnings_and_directives_name_what_else() {
        assert_eq!(
            filter(None).unwrap().max_level_hint(),
            Some(LevelFilter::WARN)
        );
        let debug = filter(Some("warn,roce_core::qp::completer=debug")).unwrap();
        assert_eq!(debug.max_level_hint(), Some(LevelFilter::DEBUG));
        assert_eq!(
            filter(Some("off")).unwrap().max_level_hint(),
            Some(LevelFilter::OFF)
        );
    }

    #[test]
    fn a_value_that_does_not_parse_is_an_error() {
        assert!(filter(Some("roce_core=loud")).is_err());
    }
}
