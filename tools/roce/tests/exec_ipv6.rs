//! `roce exec` over IPv6: Debian's unmodified ibverbs-utils and rdmacm-utils, each program
//! under its own `roce exec --ip <IPv6 address>`, in two network namespaces joined by a veth
//! pair the test creates (the ULA prefix fd00:198:18:6::/64, which never leaves the
//! namespaces; duplicate address detection off so that the addresses are usable at once).
//! RoCEv2 runs over IPv6 between GID 1 (the `--ip` address) of each side, or GID 0 (the veth's
//! link-local address). ibv_*_pingpong's own out-of-band TCP exchange goes over IPv4
//! (198.18.6.0/24 on the same veth), because its server listens on 0.0.0.0 only; the RDMA CM
//! programs (rping, ucmatose, udaddy, rdma_server/rdma_client) name the IPv6 addresses
//! themselves. Needs root (namespaces); elsewhere each test says that it skipped.

#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::exec::{
    Side, end_group, exec_cm_pair, ok_as as ok, rping_done, spawn_exec, transfers_complete,
    wait_listening,
};
use common::netns::{NsPair, Spec};
use common::{run_ok, sh};
use std::process::Output;

/// Namespace a (clients) and b (servers).
type Pair = NsPair;

/// The NICs' addresses (GID 1 of each side).
const A_IP6: &str = "fd00:198:18:6::1";
const B_IP6: &str = "fd00:198:18:6::2";
/// The veth ends' MACs, and so their link-local addresses (EUI-64), GID 0 of each side.
const A_MAC: &str = "02:00:c6:12:06:01";
const B_MAC: &str = "02:00:c6:12:06:02";
const A_LL: &str = "fe80::c6ff:fe12:601";
const B_LL: &str = "fe80::c6ff:fe12:602";
/// The addresses of the programs' TCP exchange.
const A_IP4: &str = "198.18.6.1";
const B_IP4: &str = "198.18.6.2";

/// The namespaces of this file's tests.
const SPEC: Spec<'static> = Spec {
    what: "roce exec IPv6 tests",
    prefix: "x6",
    mac: [A_MAC, B_MAC],
    link_local: [A_LL, B_LL],
    ip4: [A_IP4, B_IP4],
    ip6: Some([A_IP6, B_IP6]),
};

impl Pair {
    /// Runs the RDMA CM programs `server_argv` in b and `client_argv` in a, each under `roce
    /// exec --ip <its IPv6 address>` (at most 120 s), the client once the server's NIC is up;
    /// returns (client, server) once both have ended.
    fn run_cm(&self, server_argv: &[&str], client_argv: &[&str]) -> (Output, Output) {
        let [wa, wb] = [self.a.as_str(), self.b.as_str()]
            .map(|ns| vec!["ip", "netns", "exec", ns, "timeout", "120"]);
        let server = Side {
            wrapper: &wb,
            ip: B_IP6,
            exec_args: &[],
        };
        let client = Side {
            wrapper: &wa,
            ip: A_IP6,
            exec_args: &[],
        };
        exec_cm_pair(server, client, server_argv, client_argv)
    }

    /// Runs `argv` as the server in b and `argv B_IP4` as the client in a, each under `roce
    /// exec --ip <its IPv6 address> EXEC_ARGS` (at most 120 s), the client once the server
    /// listens on TCP `port`; returns (client, server) once both have ended.
    fn run(&self, exec_args: &[&str], argv: &[&str], port: &str) -> (Output, Output) {
        let client_argv = [argv, &[B_IP4]].concat();
        self.run_tcp(exec_args, argv, &client_argv, port)
    }

    /// As [`Pair::run`], with the client's own ARGV.
    fn run_tcp(
        &self,
        exec_args: &[&str],
        argv: &[&str],
        client_argv: &[&str],
        port: &str,
    ) -> (Output, Output) {
        let [wa, wb] = [self.a.as_str(), self.b.as_str()]
            .map(|ns| vec!["ip", "netns", "exec", ns, "timeout", "120"]);
        let server = Side {
            wrapper: &wb,
            ip: B_IP6,
            exec_args,
        };
        let client = Side {
            wrapper: &wa,
            ip: A_IP6,
            exec_args,
        };
        let server_child = spawn_exec(server, argv);
        wait_listening(server_child.id(), port);
        let client = spawn_exec(client, client_argv).wait_with_output().unwrap();
        (client, server_child.wait_with_output().unwrap())
    }
}

/// The GIDs (client's, server's) of `-g gid`: the --ip addresses for 1, the link-local ones
/// for 0.
fn gids(gid: &str) -> (&'static str, &'static str) {
    match gid {
        "0" => (A_LL, B_LL),
        _ => (A_IP6, B_IP6),
    }
}

/// Checks an ibv_*_pingpong run with `-g gid`: both sides exit 0, report `iters` iterations
/// and 2 × size × iters bytes, and name their own GID and the peer's as that index's
/// addresses ([`gids`]).
fn assert_pingpong(
    what: &str,
    gid: &str,
    (client, server): (Output, Output),
    size: u64,
    iters: u64,
) {
    let (a, b) = gids(gid);
    for (who, out, local, remote) in [("client", &client, a, b), ("server", &server, b, a)] {
        let text = ok(&format!("{what} {who}"), out);
        let bytes = format!("{} bytes in", 2 * size * iters);
        assert!(text.contains(&bytes), "{what} {who}: no {bytes:?}\n{text}");
        let line = format!("{iters} iters in");
        assert!(text.contains(&line), "{what} {who}: no {line:?}\n{text}");
        for (label, gid) in [("local address", local), ("remote address", remote)] {
            let l = text
                .lines()
                .find(|l| l.contains(label))
                .unwrap_or_else(|| panic!("{what} {who}: no {label}\n{text}"));
            assert!(l.ends_with(&format!("GID {gid}")), "{what} {who}: {l}");
        }
    }
}

/// ibv_rc_pingpong -g GID over IPv6: 1 B (inline, 1024-byte MTU) and 1 MiB (256 packets of
/// 4096 bytes each way, the ICRC over IPv6 checked on each); -c: each side checks every byte.
fn rc_pingpong(tag: &str, gid: &str, port_base: u16) {
    let Some(pair) = Pair::new(&SPEC, tag, "ibv_rc_pingpong", "ibverbs-utils") else {
        return;
    };
    let runs = [("1", "50", "1024"), ("1048576", "5", "4096")];
    for (port, (size, iters, mtu)) in (port_base..).zip(runs) {
        let port = port.to_string();
        let mut argv = vec!["ibv_rc_pingpong", "-g", gid, "-p", &port, "-c"];
        argv.extend(["-s", size, "-n", iters, "-m", mtu]);
        let out = pair.run(&["--mtu", mtu], &argv, &port);
        let what = format!("ibv_rc_pingpong -g {gid} -s {size}");
        assert_pingpong(
            &what,
            gid,
            out,
            size.parse().unwrap(),
            iters.parse().unwrap(),
        );
    }
}

/// ibv_ud_pingpong -g GID over IPv6: datagrams whose 40-byte GRH area holds the IPv6 header
/// (the server answers the address it reads there), -c checking the data after it.
fn ud_pingpong(tag: &str, gid: &str, port: &str) {
    let Some(pair) = Pair::new(&SPEC, tag, "ibv_ud_pingpong", "ibverbs-utils") else {
        return;
    };
    let argv = [
        "ibv_ud_pingpong",
        "-g",
        gid,
        "-p",
        port,
        "-c",
        "-n",
        "50",
        "-s",
        "1024",
    ];
    let out = pair.run(&[], &argv, port);
    assert_pingpong(&format!("ibv_ud_pingpong -g {gid}"), gid, out, 1024, 50);
}

/// GID 1, the --ip address.
#[test]
fn ibv_rc_pingpong_over_ipv6() {
    rc_pingpong("rc", "1", 18760);
}

#[test]
fn ibv_ud_pingpong_over_ipv6() {
    ud_pingpong("ud", "1", "18765");
}

/// GID 0, the veth's link-local address, as rxe's GID 0 (libfabric's default).
#[test]
fn ibv_rc_pingpong_over_ipv6_link_local() {
    rc_pingpong("rcll", "0", 18770);
}

#[test]
fn ibv_ud_pingpong_over_ipv6_link_local() {
    ud_pingpong("udll", "0", "18775");
}

/// `roce pingpong ARGS EXTRA` in namespace `ns`, at most two minutes, its output piped.
fn roce_pingpong(ns: &str, args: &[&str], extra: &[&str]) -> std::process::Child {
    let roce = env!("CARGO_BIN_EXE_roce");
    std::process::Command::new("ip")
        .args(["netns", "exec", ns, "timeout", "120", roce, "pingpong"])
        .args(args)
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// `roce pingpong` over IPv6 with no --ip on either side: the client connects to the server's
/// IPv6 address, and each NIC takes its address from that TCP connection (the server listens
/// on [::]), so both GIDs are the IPv6 addresses.
#[test]
fn roce_pingpong_takes_its_ipv6_address_from_the_connection() {
    let Some(pair) = Pair::new(&SPEC, "rpp", "ip", "iproute2") else {
        return;
    };
    let spawn = |ns: &str, extra: &[&str]| roce_pingpong(ns, &["-p", "18780", "-n", "20"], extra);
    let server = spawn(&pair.b, &[]);
    wait_listening(server.id(), "18780");
    let client = spawn(&pair.a, &[B_IP6]).wait_with_output().unwrap();
    let server = server.wait_with_output().unwrap();
    assert_pingpong("roce pingpong", "1", (client, server), 4096, 20);
}

/// A second IPv6 NIC on an interface whose `[::]:4791` the first holds (for both its GIDs)
/// does not start, and says why and what to do.
#[test]
fn a_second_ipv6_nic_on_the_interface_is_refused_with_the_reason() {
    let Some(pair) = Pair::new(&SPEC, "two", "ibv_rc_pingpong", "ibverbs-utils") else {
        return;
    };
    let a2 = "fd00:198:18:6::3";
    let cidr = format!("{a2}/64");
    run_ok(&[
        "ip", "-n", &pair.a, "addr", "add", &cidr, "dev", "va", "nodad",
    ]);
    let wrapper = ["ip", "netns", "exec", pair.a.as_str(), "timeout", "120"];
    let side = |ip| Side {
        wrapper: &wrapper,
        ip,
        exec_args: &[],
    };
    // NIC 1 (GIDs 0 and 1 on [::]:4791 of va) waits for its TCP exchange; ibv_rc_pingpong
    // opens its device before it listens.
    let first = spawn_exec(side(A_IP6), &["ibv_rc_pingpong", "-g", "1", "-p", "18785"]);
    wait_listening(first.id(), "18785");
    // NIC 2 on the same interface.
    let second = spawn_exec(side(a2), &["ibv_devinfo"])
        .wait_with_output()
        .unwrap();
    // NIC 1 waits for a peer that will not come: end it (its process group, which we started).
    end_group(first);
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{err}");
    assert!(
        err.contains("cannot bind UDP [::]:4791 on va")
            && err.contains("in use, by another IPv6 NIC on va")
            && err.contains("one IPv6 NIC per interface"),
        "{err}"
    );
}

/// rping through the RDMA CM over IPv6, to the server's global address (`server`, as both
/// sides name it) or its link-local one (each side naming it with its own interface as the
/// scope): the `cma_hdr` of the REQ carries IPv6 addresses, the QPs run between GIDs 1 or 0,
/// and each side checks the pings' data (-V).
fn rping_over_ipv6(tag: &str, server_side: &str, client_side: &str) {
    let Some(pair) = Pair::new(&SPEC, tag, "rping", "rdmacm-utils") else {
        return;
    };
    let (client, server) = pair.run_cm(
        &["rping", "-s", "-v", "-V", "-C", "3", "-a", server_side],
        &["rping", "-c", "-v", "-V", "-C", "3", "-a", client_side],
    );
    let (client, server) = (
        rping_done("rping -c", &client),
        rping_done("rping -s", &server),
    );
    for (who, text) in [("client", &client), ("server", &server)] {
        let pings = text.lines().filter(|l| l.contains("ping data: rdma-ping-"));
        assert_eq!(pings.count(), 3, "rping {who}:\n{text}");
    }
}

#[test]
fn rping_connects_over_ipv6_through_the_connection_manager() {
    rping_over_ipv6("rping", B_IP6, B_IP6);
}

#[test]
fn rping_connects_to_a_link_local_address() {
    rping_over_ipv6("rpingll", &format!("{B_LL}%vb"), &format!("{B_LL}%va"));
}

/// rdma_server and rdma_client: rdma_getaddrinfo of an IPv6 address, then synchronous
/// endpoints (rdma_create_ep) that exchange one message each way.
#[test]
fn rdma_getaddrinfo_and_endpoints_over_ipv6() {
    let Some(pair) = Pair::new(&SPEC, "ep", "rdma_server", "rdmacm-utils") else {
        return;
    };
    let (client, server) =
        pair.run_cm(&["rdma_server", "-s", B_IP6], &["rdma_client", "-s", B_IP6]);
    assert!(ok("rdma_client", &client).contains("rdma_client: end 0"));
    assert!(ok("rdma_server", &server).contains("rdma_server: end 0"));
}

/// udaddy: SIDR over IPv6 (the SIDR_REQ's `cma_hdr` with IPv6 addresses), then datagrams
/// whose address handle the resolution gave.
#[test]
fn udaddy_resolves_and_sends_datagrams_over_ipv6() {
    let Some(pair) = Pair::new(&SPEC, "uda", "udaddy", "rdmacm-utils") else {
        return;
    };
    let run = pair.run_cm(
        &["udaddy", "-b", B_IP6, "-C", "5"],
        &["udaddy", "-s", B_IP6, "-C", "5"],
    );
    transfers_complete("udaddy", &run);
}

/// ucmatose: RC connections through the RDMA CM over IPv6, messages each way.
#[test]
fn ucmatose_over_ipv6() {
    let Some(pair) = Pair::new(&SPEC, "ucm", "ucmatose", "rdmacm-utils") else {
        return;
    };
    let run = pair.run_cm(
        &["ucmatose", "-b", B_IP6, "-C", "5"],
        &["ucmatose", "-s", B_IP6, "-C", "5"],
    );
    transfers_complete("ucmatose", &run);
}

/// The raw backend over IPv6: `roce pingpong --backend raw` in b plays fd00:198:18:6::4, an
/// address no kernel owns, on vb. a's kernel finds it by neighbour discovery (the raw NIC
/// answers the solicitation for it), and the raw NIC finds a's address the same way; the
/// client's NIC (UDP backend) takes its address from the TCP connection to b's kernel.
#[test]
fn the_raw_backend_plays_an_ipv6_address_through_neighbour_discovery() {
    let Some(pair) = Pair::new(&SPEC, "raw", "ip", "iproute2") else {
        return;
    };
    let raw_ip = "fd00:198:18:6::4";
    let spawn = |ns: &str, extra: &[&str]| {
        roce_pingpong(ns, &["-p", "18790", "-n", "20", "-s", "4096"], extra)
    };
    let server = spawn(
        &pair.b,
        &["--backend", "raw", "--dev", "vb", "--ip", raw_ip],
    );
    wait_listening(server.id(), "18790");
    let client = spawn(&pair.a, &[B_IP6]).wait_with_output().unwrap();
    let server = server.wait_with_output().unwrap();
    for (who, out, local, remote) in [
        ("client", &client, A_IP6, raw_ip),
        ("server", &server, raw_ip, A_IP6),
    ] {
        let text = ok(&format!("roce pingpong (raw server) {who}"), out);
        assert!(text.contains("20 iters in"), "{who}: {text}");
        for (label, gid) in [("local address", local), ("remote address", remote)] {
            let line = text.lines().find(|l| l.contains(label)).unwrap();
            assert!(line.ends_with(&format!("GID {gid}")), "{who}: {line}");
        }
    }
    // a's kernel learnt the raw NIC's MAC (vb's) from its neighbour advertisement.
    let neigh = sh(&["ip", "-n", &pair.a, "-6", "neigh", "show", raw_ip]);
    let neigh = String::from_utf8_lossy(&neigh.stdout);
    assert!(neigh.contains(&format!("lladdr {B_MAC}")), "{neigh:?}");
}
