//! The shipped deadlock scenario: `roce sim ring5-deadlock` finds the PFC deadlock of its ring,
//! names the five clockwise ring links in its summary, and stops the run with nothing dropped.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::roce;

#[test]
fn the_ring_scenario_deadlocks_and_its_cycle_is_reported() {
    let out = std::env::temp_dir().join(format!("roce-ring5-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/ring5-deadlock.toml"
    );
    let o = roce(&["sim", scenario, "--out", out.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let deadlock = &summary["deadlock"];
    let cycle: Vec<(u64, u64, u64)> = deadlock["cycle"]
        .as_array()
        .unwrap_or_else(|| panic!("no deadlock in {summary}"))
        .iter()
        .map(|q| {
            let n = |k: &str| q[k].as_u64().unwrap();
            (n("switch"), n("towards"), n("priority"))
        })
        .collect();
    // Switches are nodes 5-9 of ring5-topology.txt; the loop runs clockwise on priority 3.
    assert_eq!(
        cycle,
        [(5, 6, 3), (6, 7, 3), (7, 8, 3), (8, 9, 3), (9, 5, 3)]
    );
    assert!(deadlock["since_ns"].as_u64() < deadlock["confirmed_ns"].as_u64());
    assert_eq!(summary["flows_finished"], 0);
    assert_eq!(summary["flows_unfinished"], 5);
    assert_eq!(summary["drops"], 0);
    let on_disk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(on_disk["deadlock"], summary["deadlock"]);
    let _ = std::fs::remove_dir_all(&out);
}
