//! Two network namespaces joined by a veth pair, each end with an IPv4 address and, where
//! asked, an IPv6 one, for the tests that run a `roce exec` program on each side over IPv6
//! (GID 0, the link-local address, or an IPv6 `--ip`). Only the test's own namespaces and
//! addresses (198.18.0.0/15, the ULA fd00:198:18::/48, the ends' link-local addresses).

use super::exec::have;
use super::{have_tools, run_ok, sh};
use std::time::{Duration, Instant};

/// What to build: the names' prefix (`roce-PREFIX-a-TAG-PID`), and per end (a, b) its MAC —
/// which makes its link-local address, GID 0 — that address, its IPv4 address (/24) and
/// optionally an IPv6 one (/64).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec<'a> {
    /// Which tests these are, for the skip messages.
    pub what: &'a str,
    pub prefix: &'a str,
    pub mac: [&'a str; 2],
    pub link_local: [&'a str; 2],
    pub ip4: [&'a str; 2],
    pub ip6: Option<[&'a str; 2]>,
}

/// Namespace a (clients, device `va`) and b (servers, `vb`), removed on drop.
#[derive(Debug)]
pub(crate) struct NsPair {
    pub a: String,
    pub b: String,
}

impl NsPair {
    /// Creates the namespaces and the veth, or returns None (and says why) where that cannot
    /// be done here (not root, no `ip`), or where `program` (from Debian's `package`) is
    /// missing. Duplicate address detection is off and each end knows the other's MAC for
    /// its link-local (and IPv6) address from the start: right after a link comes up, IPv6
    /// neighbour discovery can take a second, in which an RC QP's retries run out. Returns
    /// once both link-local addresses are usable, as a NIC takes GID 0 from its interface
    /// when it starts.
    pub(crate) fn new(spec: &Spec<'_>, tag: &str, program: &str, package: &str) -> Option<Self> {
        if !have(program, package) {
            return None;
        }
        if sh(&["id", "-u"]).stdout != b"0\n" {
            super::skipped(&format!("{} need root (network namespaces)", spec.what));
            return None;
        }
        if !have_tools(spec.what, &["ip"]) {
            return None;
        }
        let id = std::process::id();
        let p = spec.prefix;
        let (a, b) = (
            format!("roce-{p}-a-{tag}-{id}"),
            format!("roce-{p}-b-{tag}-{id}"),
        );
        if !sh(&["ip", "netns", "add", &a]).status.success() {
            super::skipped("cannot create network namespaces here");
            return None;
        }
        run_ok(&["ip", "netns", "add", &b]);
        let pair = Self { a, b };
        for ns in [&pair.a, &pair.b] {
            // Interfaces made from now on skip duplicate address detection: their addresses,
            // the link-local one too, are usable as soon as the link is up.
            for conf in ["default", "all"] {
                let key = format!("net.ipv6.conf.{conf}.accept_dad=0");
                run_ok(&["ip", "netns", "exec", ns, "sysctl", "-qw", &key]);
            }
        }
        let [mac_a, mac_b] = spec.mac;
        run_ok(&[
            "ip", "-n", &pair.a, "link", "add", "va", "address", mac_a, "type", "veth", "peer",
            "name", "vb", "address", mac_b, "netns", &pair.b,
        ]);
        for (us, them, ns, dev) in [(0, 1, &pair.a, "va"), (1, 0, &pair.b, "vb")] {
            let peer_ips = [Some(spec.link_local[them]), spec.ip6.map(|ip| ip[them])];
            for peer in peer_ips.into_iter().flatten() {
                let mac = spec.mac[them];
                run_ok(&[
                    "ip",
                    "-n",
                    ns,
                    "neigh",
                    "replace",
                    peer,
                    "lladdr",
                    mac,
                    "dev",
                    dev,
                    "nud",
                    "permanent",
                ]);
            }
            if let Some(ip6) = spec.ip6 {
                let cidr6 = format!("{}/64", ip6[us]);
                run_ok(&["ip", "-n", ns, "addr", "add", &cidr6, "dev", dev, "nodad"]);
            }
            let cidr4 = format!("{}/24", spec.ip4[us]);
            run_ok(&["ip", "-n", ns, "addr", "add", &cidr4, "dev", dev]);
            run_ok(&["ip", "-n", ns, "link", "set", dev, "mtu", "9000", "up"]);
            run_ok(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        // The kernel gives a link its link-local address once its carrier is up (both ends):
        // wait for it (20 s at most).
        for (ns, dev, ll) in [
            (&pair.a, "va", spec.link_local[0]),
            (&pair.b, "vb", spec.link_local[1]),
        ] {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let shown = sh(&["ip", "-n", ns, "-6", "addr", "show", "dev", dev]);
                let text = String::from_utf8_lossy(&shown.stdout).into_owned();
                let ready = text
                    .lines()
                    .any(|l| l.contains(&format!("inet6 {ll}/64")) && !l.contains("tentative"));
                if ready {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "no link-local {ll} on {dev} after 20 s:\n{text}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Some(pair)
    }

    /// `ip netns exec NS timeout 120`: the wrapper of a program in `ns`.
    pub(crate) fn wrapper(ns: &str) -> [&str; 6] {
        ["ip", "netns", "exec", ns, "timeout", "120"]
    }
}

impl Drop for NsPair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = sh(&["ip", "netns", "delete", ns]);
        }
    }
}
