//! What the tshark cross-checks share: whether tshark is there, and its numbers.

use std::process::Command;

/// Whether tshark runs here; without it `test` is skipped with a notice, except under
/// `CI=true` (.ci/run installs it), where that is a failure, as for every other tool.
pub fn available(test: &str) -> bool {
    let found = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v != "true"),
            "tshark is not installed, and CI must run the cross-check: .ci/run installs it"
        );
        super::skipped(&format!(
            "{test}: tshark is not installed (apt-get install tshark)"
        ));
    }
    found
}

/// A tshark field value as a number: decimal or 0x-hex; booleans print as 1/0 or True/False.
/// Anything else is a failure of the test: tshark printed what no field of ours can be.
pub fn number(cell: &str) -> Option<u64> {
    match cell {
        "" => None,
        "True" => Some(1),
        "False" => Some(0),
        hex if hex.starts_with("0x") => {
            Some(u64::from_str_radix(&hex[2..], 16).expect("tshark prints valid hex"))
        }
        decimal => Some(
            decimal
                .parse()
                .unwrap_or_else(|_| panic!("tshark printed {decimal:?}")),
        ),
    }
}
