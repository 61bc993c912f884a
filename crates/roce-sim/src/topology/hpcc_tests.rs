use proptest::prelude::*;

use super::*;
use crate::topology::NodeId;

/// The first lines of `simulation/mix/topology.txt`'s shape: two hosts, one switch.
const SMALL: &str = "3 1 2\n2\n0 2 100Gbps 1us 0.000000\n1 2 25Gbps 1000ns 0.001\n";

#[test]
fn reads_nodes_links_rates_and_delays() {
    let t = Topology::from_hpcc("small.txt", SMALL).unwrap();
    assert_eq!(t.node_count(), 3);
    assert_eq!(t.hosts().collect::<Vec<_>>(), [NodeId(0), NodeId(1)]);
    assert_eq!(t.switches().collect::<Vec<_>>(), [NodeId(2)]);
    let l = t.links();
    assert_eq!(
        (l[0].a, l[0].b, l[0].rate_bps),
        (NodeId(0), NodeId(2), 100_000_000_000)
    );
    assert_eq!(l[0].delay, Duration::from_micros(1));
    assert_eq!(l[1].rate_bps, 25_000_000_000);
    assert_eq!(l[1].delay, Duration::from_nanos(1000));
    assert_eq!(l[1].error_rate, 0.001);
}

#[test]
fn accepts_comments_blank_lines_and_switch_ids_over_several_lines() {
    let text =
        "# a comment\n\n4 2 3\n2\n3\n0 2 10Gbps 2.5us 0\n1 3 1.5Gbps 1ms 0\n2 3 40Gbps 0.5us 0\n";
    let t = Topology::from_hpcc("c.txt", text).unwrap();
    assert_eq!(t.switches().collect::<Vec<_>>(), [NodeId(2), NodeId(3)]);
    assert_eq!(t.links()[0].delay, Duration::from_nanos(2500));
    assert_eq!(t.links()[1].rate_bps, 1_500_000_000);
    assert_eq!(t.links()[1].delay, Duration::from_millis(1));
}

#[test]
fn writes_what_it_reads() {
    let t = Topology::from_hpcc("small.txt", SMALL).unwrap();
    let text = t.to_hpcc();
    assert_eq!(
        text,
        "3 1 2\n2\n0 2 100Gbps 1000ns 0.000000\n1 2 25Gbps 1000ns 0.001000\n"
    );
    assert_eq!(Topology::from_hpcc("again", &text).unwrap(), t);
}

/// One malformed input per rule, with the line and the words its error must carry.
#[test]
fn malformed_files_name_file_line_and_field() {
    let cases: &[(&str, &str)] = &[
        ("", "f.txt:1: empty file"),
        ("# only a comment\n", "f.txt:1: empty file"),
        ("3 1\n2\n", "f.txt:1: header \"3 1\""),
        ("3 x 2\n", "f.txt:1: header"),
        ("3 4 0\n", "f.txt:1: header"),
        ("3 1 1\nfoo\n", "f.txt:2: switch id \"foo\""),
        ("3 1 1\n7\n", "f.txt:2: switch id 7 is not below node_num 3"),
        ("3 2 1\n2 2\n", "f.txt:2: switch id 2 is listed twice"),
        ("3 2 1\n2\n", "f.txt:2: expected 2 switch ids, found 1"),
        ("3 1 1\n2 1\n", "f.txt:2: expected 1 switch ids, found 2"),
        ("3 1 1\n2\n0 2 100Gbps 1us\n", "f.txt:3: expected 5 fields"),
        (
            "3 1 1\n2\n0 2 100Gbs 1us 0\n",
            "f.txt:3: link rate \"100Gbs\": expected a number followed by bps/Kbps/Mbps/Gbps",
        ),
        ("3 1 1\n2\n0 2 Gbps 1us 0\n", "f.txt:3: link rate \"Gbps\""),
        (
            "3 1 1\n2\n0 2 0Gbps 1us 0\n",
            "f.txt:3: link rate \"0Gbps\"",
        ),
        (
            "3 1 1\n2\n0 2 1.5bps 1us 0\n",
            "f.txt:3: link rate \"1.5bps\"",
        ),
        (
            "3 1 1\n2\n0 2 100Gbps 1 0\n",
            "f.txt:3: link delay \"1\": expected a number followed by s/ms/us/ns",
        ),
        (
            "3 1 1\n2\n0 2 100Gbps 1.5ns 0\n",
            "f.txt:3: link delay \"1.5ns\"",
        ),
        (
            "3 1 1\n2\n0 2 100Gbps 1us -0.1\n",
            "f.txt:3: error rate \"-0.1\"",
        ),
        (
            "3 1 1\n2\n0 2 100Gbps 1us nan\n",
            "f.txt:3: error rate \"nan\"",
        ),
        ("3 1 1\n2\nx 2 100Gbps 1us 0\n", "f.txt:3: link src \"x\""),
        (
            "3 1 1\n2\n0 9 100Gbps 1us 0\n",
            "f.txt:3: link 0-9: node 9 does not exist",
        ),
        ("3 1 1\n2\n2 2 100Gbps 1us 0\n", "f.txt:3: link 2-2"),
        (
            "3 1 2\n2\n0 2 1Gbps 1us 0\n2 0 1Gbps 1us 0\n",
            "f.txt:4: link 2-0 is listed twice",
        ),
        (
            "3 1 2\n2\n0 2 1Gbps 1us 0\n",
            "f.txt:3: expected 2 links, found 1",
        ),
        (
            "3 1 1\n2\n0 2 1Gbps 1us 0\n1 2 1Gbps 1us 0\n",
            "f.txt:4: a link beyond the header's link_num 1",
        ),
    ];
    for (text, want) in cases {
        let err = Topology::from_hpcc("f.txt", text).unwrap_err().to_string();
        assert!(
            err.starts_with(want),
            "{text:?}: got {err:?}, want {want:?}"
        );
    }
}

proptest! {
    /// Arbitrary bytes and arbitrary mutations of a good file never panic.
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = Topology::from_hpcc("p.txt", &text);
    }

    #[test]
    fn mutated_good_file_never_panics(pos in 0usize..SMALL.len(), byte in any::<u8>()) {
        let mut bytes = SMALL.as_bytes().to_vec();
        bytes[pos] = byte;
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(t) = Topology::from_hpcc("m.txt", &text) {
            // Whatever parses writes back to something that parses to the same value.
            prop_assert_eq!(Topology::from_hpcc("w.txt", &t.to_hpcc()).unwrap(), t);
        }
    }
}
