//! GID 0 of an IPv4 NIC, as rxe's: the IPv6 link-local address of the interface that holds
//! the NIC's address, carrying RoCEv2 over IPv6. Two network namespaces joined by a veth pair
//! the test creates, an IPv4 address on each end (198.18.7.0/24; duplicate address detection
//! off, so that the link-local addresses are usable as soon as the link is up), each program
//! under its own `roce exec --ip <IPv4 address>`: Debian's ibv_ud_pingpong and ibv_rc_pingpong
//! with `-g 0`, and libfabric's fi_pingpong over its verbs provider with its defaults (which
//! use GID 0), datagram and, through ofi_rxd, reliable. The programs' own out-of-band TCP
//! exchange goes over IPv4. Needs root (namespaces); elsewhere each test says that it skipped,
//! as where a program is missing.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::exec::{Side, end_group, ok_as as ok, spawn_exec, wait_listening};
use common::netns::{NsPair, Spec};
use common::run_ok;
use std::process::Output;

/// Namespace a (clients) and b (servers).
type Pair = NsPair;

/// The NICs' addresses (GID 1 of each side, `::ffff:` + the address).
const A_IP: &str = "198.18.7.1";
const B_IP: &str = "198.18.7.2";
/// The veth ends' MACs, and so their link-local addresses (EUI-64): GID 0 of each side.
const A_MAC: &str = "02:00:c6:12:07:01";
const B_MAC: &str = "02:00:c6:12:07:02";
const A_LL: &str = "fe80::c6ff:fe12:701";
const B_LL: &str = "fe80::c6ff:fe12:702";

/// The namespaces of this file's tests.
const SPEC: Spec<'static> = Spec {
    what: "roce exec GID 0 tests",
    prefix: "g0",
    mac: [A_MAC, B_MAC],
    link_local: [A_LL, B_LL],
    ip4: [A_IP, B_IP],
    ip6: None,
};

impl Pair {
    /// Runs `server` in b and then, once something listens on TCP `port` there, `client` in a,
    /// each under `roce exec --ip <its address>` (at most 120 s); returns (client, server) once
    /// both have ended.
    fn run(&self, server: &[&str], client: &[&str], port: &str) -> (Output, Output) {
        let (wa, wb) = (Self::wrapper(&self.a), Self::wrapper(&self.b));
        let server_child = spawn_exec(side(&wb, B_IP), server);
        wait_listening(server_child.id(), port);
        let client = spawn_exec(side(&wa, A_IP), client)
            .wait_with_output()
            .unwrap();
        (client, server_child.wait_with_output().unwrap())
    }
}

/// A side under `wrapper` with the NIC at `ip`, no other `roce exec` option.
fn side<'a>(wrapper: &'a [&'a str], ip: &'a str) -> Side<'a> {
    Side {
        wrapper,
        ip,
        exec_args: &[],
    }
}

/// Checks an ibv_*_pingpong run with `-g 0`: both sides exit 0 and report `iters` iterations
/// and 2 × size × iters bytes, and each shows its own and the other's link-local address as
/// the GIDs.
fn assert_pingpong(what: &str, (client, server): (Output, Output), size: u64, iters: u64) {
    for (who, out, us, peer) in [
        ("client", &client, A_LL, B_LL),
        ("server", &server, B_LL, A_LL),
    ] {
        let text = ok(&format!("{what} {who}"), out);
        let bytes = format!("{} bytes in", 2 * size * iters);
        assert!(text.contains(&bytes), "{what} {who}: no {bytes:?}\n{text}");
        let line = format!("{iters} iters in");
        assert!(text.contains(&line), "{what} {who}: no {line:?}\n{text}");
        for (label, gid) in [("local address", us), ("remote address", peer)] {
            let found = text
                .lines()
                .find(|l| l.contains(label))
                .unwrap_or_else(|| panic!("{what} {who}: no {label}\n{text}"));
            assert!(
                found.ends_with(&format!("GID {gid}")),
                "{what} {who}: {found}"
            );
        }
    }
}

/// `program -g 0 -c` (an ibv_*_pingpong, every byte checked) of `iters` messages of `size`
/// bytes between the namespaces, its TCP exchange on `port`.
fn pingpong_from_gid_0(tag: &str, program: &str, port: &str, size: u64, iters: u64) {
    let Some(pair) = Pair::new(&SPEC, tag, program, "ibverbs-utils") else {
        return;
    };
    let (size_arg, iters_arg) = (size.to_string(), iters.to_string());
    let argv = [program, "-g", "0", "-p", port, "-c"];
    let argv = [&argv[..], &["-n", &iters_arg, "-s", &size_arg]].concat();
    let client = [&argv[..], &[B_IP]].concat();
    let out = pair.run(&argv, &client, port);
    assert_pingpong(&format!("{program} -g 0"), out, size, iters);
}

#[test]
fn ibv_ud_pingpong_from_gid_0_of_an_ipv4_nic() {
    pingpong_from_gid_0("ud", "ibv_ud_pingpong", "18790", 1024, 50);
}

/// 64 KiB messages, 64 packets of 1024 bytes each (`roce exec`'s MTU), acknowledged.
#[test]
fn ibv_rc_pingpong_from_gid_0_of_an_ipv4_nic() {
    pingpong_from_gid_0("rc", "ibv_rc_pingpong", "18791", 65536, 20);
}

/// Checks a fi_pingpong run: both sides exit 0, and print a result row for each size of
/// `sizes` (its first column), each with as many transfers acknowledged as sent.
fn assert_fi_pingpong(what: &str, (client, server): (Output, Output), sizes: &[&str]) {
    for (who, out) in [("client", &client), ("server", &server)] {
        let text = ok(&format!("{what} {who}"), out);
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip_while(|l| !l.starts_with("bytes"))
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        let got: Vec<&str> = rows.iter().filter_map(|r| r.first().copied()).collect();
        assert_eq!(got, sizes, "{what} {who}:\n{text}");
        for row in &rows {
            assert!(
                row.len() > 2 && row[2] == format!("={}", row[1]),
                "{what} {who}: not all acknowledged: {row:?}\n{text}"
            );
        }
    }
}

/// fi_pingpong with `provider` and endpoint type `ep` between the namespaces, all its other
/// defaults (`-c` checks the data; the control exchange is on TCP 47592): a row per size of
/// `sizes`, each acknowledged.
fn fi_pingpong(tag: &str, provider: &str, ep: &str, sizes: &[&str]) {
    let Some(pair) = Pair::new(&SPEC, tag, "fi_pingpong", "libfabric-bin") else {
        return;
    };
    let argv = ["fi_pingpong", "-p", provider, "-e", ep, "-c"];
    let client = [&argv[..], &[B_IP]].concat();
    let out = pair.run(&argv, &client, "47592");
    assert_fi_pingpong(&format!("fi_pingpong -p '{provider}' -e {ep}"), out, sizes);
}

/// libfabric's verbs provider, datagram endpoints: its addresses are GID 0 (FI_VERBS_GID_IDX,
/// 0 unless set) and its QPN; the sizes stop at the port's MTU (1024 bytes, `roce exec`'s
/// default).
#[test]
fn fi_pingpong_over_verbs_datagrams_from_gid_0_of_an_ipv4_nic() {
    fi_pingpong("fidg", "verbs", "dgram", &["64", "256", "1k"]);
}

/// libfabric's reliable endpoints made by ofi_rxd over the verbs provider's datagrams (GID 0):
/// messages up to 1 MiB, cut into datagrams and acknowledged by rxd.
#[test]
fn fi_pingpong_over_verbs_rxd_from_gid_0_of_an_ipv4_nic() {
    let sizes = ["64", "256", "1k", "4k", "64k", "1m"];
    fi_pingpong("firxd", "verbs;ofi_rxd", "rdm", &sizes);
}

/// A program under `roce exec` that holds its NIC open (an ibv_rc_pingpong server waiting for
/// a client that never comes), ended with its process group when dropped.
struct Holder(Option<std::process::Child>);

impl Holder {
    fn new(side: Side<'_>, port: &str) -> Self {
        let child = spawn_exec(side, &["ibv_rc_pingpong", "-p", port]);
        wait_listening(child.id(), port);
        Self(Some(child))
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        if let Some(child) = self.0.take() {
            end_group(child);
        }
    }
}

/// A second IPv4 NIC on the interface finds its link-local address (port 4791) taken by the
/// first: it starts all the same, shows the address as GID 0, and refuses a QP on it at RTR,
/// saying why on stderr; its GID 1 still carries traffic.
#[test]
fn gid_0_of_a_second_ipv4_nic_on_the_interface_is_refused_with_the_reason() {
    let Some(pair) = Pair::new(&SPEC, "two", "ibv_rc_pingpong", "ibverbs-utils") else {
        return;
    };
    let b2 = "198.18.7.3";
    run_ok(&[
        "ip",
        "-n",
        &pair.b,
        "addr",
        "add",
        "198.18.7.3/24",
        "dev",
        "vb",
    ]);
    let (wa, wb) = (Pair::wrapper(&pair.a), Pair::wrapper(&pair.b));
    // The first NIC on vb, holding GID 0's socket.
    let _holder = Holder::new(side(&wb, B_IP), "18792");
    // The second: the server, on -g 0, moves its QP to RTR first, and is refused.
    let run = |gid: &str, port: &str| {
        let server = ["ibv_rc_pingpong", "-g", gid, "-p", port, "-n", "5"];
        let server_child = spawn_exec(side(&wb, b2), &server);
        wait_listening(server_child.id(), port);
        let client = [&server[..], &[b2]].concat();
        let client = spawn_exec(side(&wa, A_IP), &client)
            .wait_with_output()
            .unwrap();
        (client, server_child.wait_with_output().unwrap())
    };
    let (client, server) = run("0", "18793");
    assert!(!server.status.success() && !client.status.success());
    let err = String::from_utf8_lossy(&server.stderr);
    assert!(
        err.contains(&format!(
            "GID 0 carries no traffic here: UDP [{B_LL}%vb]:4791, vb's link-local address, \
             cannot be bound: in use"
        )),
        "{err}"
    );
    // It still shows the address as GID 0, and its GID 1 carries traffic.
    let devinfo = spawn_exec(side(&wb, b2), &["ibv_devinfo", "-v"])
        .wait_with_output()
        .unwrap();
    let text = ok("ibv_devinfo", &devinfo);
    assert!(
        text.contains(&format!("GID[  0]:\t\t{B_LL}, RoCE v2")),
        "{text}"
    );
    let (client, server) = run("1", "18794");
    ok("ibv_rc_pingpong -g 1 client", &client);
    ok("ibv_rc_pingpong -g 1 server", &server);
}
