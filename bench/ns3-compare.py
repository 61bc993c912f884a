#!/usr/bin/env python3
"""Compare two fct.txt files (HPCC's ns-3 and roce sim) of the same flows, as
analysis/fct_analysis.py of alibaba-edu/High-Precision-Congestion-Control tabulates one: flows
of dport 100 sorted by size, cut into 5 % bins by count, per bin its largest size and the
p50/p95/p99 slowdown (a[int(n * p)] of the sorted slowdowns), slowdown = fct / standalone fct,
at least 1.

Both sides' slowdown is computed with one standalone FCT, third.cc's `qp_finish`:
  standalone = base_rtt + (size + ceil(size / 1000) * 48) * 8e9 / bottleneck   (ns, floor)
  base_rtt   = 2 * sum(link delays) + sum(1000 * 8e9 / link rate, each floored)
over the topology file's shortest paths, so the two differ only in their FCTs (roce sim's own
fct.txt uses its packets: 1024-byte payloads and RoCEv2 headers). Only the flows that finished
in both are binned; a flow is matched by (src, dst, size) and its start within 10 ns (ns-3
reads start times through a double).

Usage: ns3-compare.py --topology fat.txt --flows flow.txt --ns3 fct_ns3.txt --ours fct.txt
       [--summary summary.json] [--ns3-wall S] [--ours-wall S] [--title T] [--md F] [--json F]
       [--tolerance 0.25] [--names "ns-3,roce sim"]

--names labels the two sides in the table (two runs of one simulator compare just as well).
"""
import argparse
import collections
import json
import sys

PAYLOAD = 1000
HEADER = 48


def parse_rate(s):
    for suffix, mult in (("Gbps", 1e9), ("Mbps", 1e6), ("Kbps", 1e3), ("bps", 1)):
        if s.endswith(suffix):
            return int(float(s[: -len(suffix)]) * mult)
    raise ValueError("rate %r" % s)


def parse_delay(s):
    for suffix, mult in (("ns", 1), ("us", 1e3), ("ms", 1e6), ("s", 1e9)):
        if s.endswith(suffix):
            return int(round(float(s[: -len(suffix)]) * mult))
    raise ValueError("delay %r" % s)


def read_topology(path):
    with open(path) as f:
        tokens = f.read().split("\n")
    nodes, nswitch, nlinks = map(int, tokens[0].split()[:3])
    switches = set(map(int, tokens[1].split()))
    nbr = collections.defaultdict(list)
    for line in tokens[2 : 2 + nlinks]:
        a, b, rate, delay = line.split()[:4]
        a, b = int(a), int(b)
        r, d = parse_rate(rate), parse_delay(delay)
        nbr[a].append((b, r, d))
        nbr[b].append((a, r, d))
    return nodes, switches, nbr


class Paths:
    """third.cc's CalculateRoute: BFS from each host through switches only; per node the
    delay, tx delay and bottleneck of the first path found (all shortest paths of a fat-tree
    are alike)."""

    def __init__(self, topo):
        self.nodes, self.switches, self.nbr = topo
        self.cache = {}

    def from_host(self, host):
        if host in self.cache:
            return self.cache[host]
        dist = {host: 0}
        delay = {host: 0}
        tx = {host: 0}
        bw = {host: 1 << 64}
        queue = [host]
        i = 0
        while i < len(queue):
            now = queue[i]
            i += 1
            for nxt, rate, d in self.nbr[now]:
                if nxt not in dist:
                    dist[nxt] = dist[now] + 1
                    delay[nxt] = delay[now] + d
                    tx[nxt] = tx[now] + PAYLOAD * 1000000000 * 8 // rate
                    bw[nxt] = min(bw[now], rate)
                    if nxt in self.switches:
                        queue.append(nxt)
        self.cache[host] = (delay, tx, bw)
        return self.cache[host]

    def standalone(self, src, dst, size):
        # third.cc indexes pairDelay[src][dst] from the BFS rooted at dst.
        delay, tx, bw = self.from_host(dst)
        rtt = delay[src] * 2 + tx[src]
        total = size + ((size - 1) // PAYLOAD + 1) * HEADER
        return rtt + total * 8000000000 // bw[src]


def host_of(ip_hex):
    ip = int(ip_hex, 16)
    return ((ip >> 16) & 0xFF) * 256 + ((ip >> 8) & 0xFF)


def read_fct(path):
    """(src, dst, sport, dport, size, start_ns, fct_ns, standalone_ns) per line."""
    out = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) != 8 or line.startswith("#"):
                continue
            out.append((host_of(p[0]), host_of(p[1]), int(p[2]), int(p[3]), int(p[4]),
                        int(p[5]), int(p[6]), int(p[7])))
    return out


def read_flows(path):
    flows = []
    with open(path) as f:
        n = int(f.readline().split()[0])
        for line in f:
            p = line.split()
            if len(p) == 6:
                flows.append((int(p[0]), int(p[1]), int(p[3]), int(p[4]), p[5]))
    return n, flows


def match(ns3, ours):
    """Pairs (ns3 record, our record) of the same flow."""
    index = collections.defaultdict(list)
    for r in ours:
        index[(r[0], r[1], r[4])].append(r)
    pairs = []
    for r in ns3:
        cands = index.get((r[0], r[1], r[4]))
        if not cands:
            continue
        best = min(range(len(cands)), key=lambda i: abs(cands[i][5] - r[5]))
        if abs(cands[best][5] - r[5]) <= 10:
            pairs.append((r, cands.pop(best)))
    return pairs


def pctl(a, p):
    return a[int(len(a) * p)]


def table(rows, step=5):
    """rows: (size, slowdown_a, slowdown_b); fct_analysis.py's bins of both."""
    rows = sorted(rows)
    n = len(rows)
    bins = []
    for i in range(0, 100, step):
        lo, hi = i * n // 100, (i + step) * n // 100
        part = rows[lo:hi]
        if not part:
            continue
        a = sorted(x[1] for x in part)
        b = sorted(x[2] for x in part)
        bins.append({
            "percentile": i / 100.0,
            "max_size": part[-1][0],
            "flows": len(part),
            "ns3": [pctl(a, 0.5), pctl(a, 0.95), pctl(a, 0.99)],
            "ours": [pctl(b, 0.5), pctl(b, 0.95), pctl(b, 0.99)],
        })
    a = sorted(x[1] for x in rows)
    b = sorted(x[2] for x in rows)
    overall = {"flows": n, "ns3": [pctl(a, q) for q in (0.5, 0.95, 0.99)],
               "ours": [pctl(b, q) for q in (0.5, 0.95, 0.99)]} if rows else None
    return bins, overall


def num(s):
    """A float, or None for "?" (not measured)."""
    return None if s == "?" else float(s)


def opt(v):
    return "?" if v is None else str(v)


def fmt_size(b):
    if b >= 1000000:
        return "%.3g MB" % (b / 1e6)
    if b >= 1000:
        return "%.3g KB" % (b / 1e3)
    return "%d B" % b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", required=True)
    ap.add_argument("--flows", required=True)
    ap.add_argument("--ns3", required=True)
    ap.add_argument("--ours", required=True)
    ap.add_argument("--summary")
    ap.add_argument("--ns3-wall", type=num)
    ap.add_argument("--ours-wall", type=num)
    ap.add_argument("--ns3-cpu", type=num)
    ap.add_argument("--ours-cpu", type=num)
    ap.add_argument("--title", default="")
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--tolerance", type=float, default=0.25)
    ap.add_argument("--names", default="ns-3,roce sim",
                    help="the two sides' names, comma-separated (the --ns3 side first)")
    args = ap.parse_args()
    names = args.names.split(",")
    if len(names) != 2 or not all(names):
        ap.error("--names takes two names separated by a comma, not %r" % args.names)
    first, second = names

    paths = Paths(read_topology(args.topology))
    declared, flows = read_flows(args.flows)
    ns3 = [r for r in read_fct(args.ns3) if r[3] == 100]
    ours = [r for r in read_fct(args.ours) if r[3] == 100]
    pairs = match(ns3, ours)

    # The standalone FCTs: ns-3's own column against ours recomputed (a check of this script),
    # and roce sim's own column against HPCC's definition (how far its definition is).
    ns3_col_diff = sum(1 for a, _ in pairs if a[7] != paths.standalone(a[0], a[1], a[4]))
    own = [b[7] / paths.standalone(b[0], b[1], b[4]) for _, b in pairs]
    rows = []
    for a, b in pairs:
        ideal = paths.standalone(a[0], a[1], a[4])
        rows.append((a[4], max(1.0, a[6] / ideal), max(1.0, b[6] / ideal)))
    bins, overall = table(rows)
    # Flow by flow: our FCT over ns-3's, by size class.
    per_flow = {}
    for name, lo, hi in (("all", 0, 1 << 62), ("< 10 KB", 0, 10000),
                         ("10 KB - 1 MB", 10000, 1000000), (">= 1 MB", 1000000, 1 << 62)):
        r = sorted(b[6] / a[6] for a, b in pairs if lo <= a[4] < hi and a[6] > 0)
        if r:
            per_flow[name] = {"flows": len(r), "p5": pctl(r, 0.05), "p50": pctl(r, 0.5),
                              "p95": pctl(r, 0.95)}
    tol = args.tolerance

    def verdict(x):
        r = [o / n for n, o in zip(x["ns3"], x["ours"])]
        x["ratio"] = r
        x["pass"] = all(abs(v - 1) <= tol for v in r)
        return x

    for b in bins:
        verdict(b)
    if overall:
        verdict(overall)

    summary = {}
    if args.summary:
        with open(args.summary) as f:
            summary = json.load(f)
    data_pkts_ns3 = sum((f[3] - 1) // PAYLOAD + 1 for f in flows)
    data_pkts_ours = sum((f[3] - 1) // 1024 + 1 for f in flows)
    result = {
        "title": args.title,
        "names": [first, second],
        "flows_in_file": len(flows),
        "flows_declared": declared,
        "finished_ns3": len(ns3),
        "finished_ours": len(ours),
        "compared": len(pairs),
        "tolerance": tol,
        "ns3_standalone_column_mismatches": ns3_col_diff,
        "ours_standalone_over_hpcc": {
            "min": min(own) if own else None,
            "mean": sum(own) / len(own) if own else None,
            "max": max(own) if own else None,
        },
        "wall_s": {"ns3": args.ns3_wall, "ours": args.ours_wall},
        "cpu_s": {"ns3": args.ns3_cpu, "ours": args.ours_cpu},
        "data_packets": {"ns3": data_pkts_ns3, "ours": data_pkts_ours},
        "ours_summary": {k: summary.get(k) for k in (
            "packet_hops", "packet_hops_per_s", "simulated_s", "drops", "pfc_pauses",
            "ce_marks", "retransmit_timeouts", "retransmitted_packets", "flows_unfinished")},
        "per_flow_fct_ratio": per_flow,
        "overall": overall,
        "bins": bins,
        "bins_passed": sum(1 for b in bins if b["pass"]),
    }

    md = []
    md.append("### %s" % (args.title or "%s vs %s" % (first, second)))
    md.append("")
    if args.names == ap.get_default("names"):
        md.append("%d flows; finished: ns-3 %d, roce sim %d; compared (finished in both) %d. "
                  "Wall time (CPU time): ns-3 %s s (%s), roce sim %s s (%s). Data packets: ns-3 %d "
                  "(1000-byte payloads), roce sim %d (1024); roce sim packet-hops %s." % (
                      len(flows), len(ns3), len(ours), len(pairs),
                      opt(args.ns3_wall), opt(args.ns3_cpu), opt(args.ours_wall),
                      opt(args.ours_cpu), data_pkts_ns3, data_pkts_ours,
                      opt(summary.get("packet_hops"))))
    else:
        md.append("%d flows; finished: %s %d, %s %d; compared (finished in both) %d." % (
            len(flows), first, len(ns3), second, len(ours), len(pairs)))
    if own and args.names == ap.get_default("names"):
        md.append("")
        md.append("Slowdown of both from third.cc's standalone FCT (ns-3's own column agrees on "
                  "%d of %d flows); roce sim's own standalone FCT is %.3f–%.3f × that (mean %.3f)."
                  % (len(pairs) - ns3_col_diff, len(pairs), min(own), max(own),
                     sum(own) / len(own)))
    if per_flow:
        md.append("")
        md.append("Flow by flow, %s's FCT / %s's (p5, p50, p95): " % (second, first) + "; ".join(
            "%s %.2f, %.2f, %.2f (%d flows)" % (k, v["p5"], v["p50"], v["p95"], v["flows"])
            for k, v in per_flow.items()) + ".")
    md.append("")
    md.append("| bin | max size | flows | %s p50 | p95 | p99 | %s p50 | p95 | p99 "
              "| ratio p50 | p95 | p99 | within %d %% |" % (first, second, round(tol * 100)))
    md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for b in bins + ([dict(overall, percentile=None, max_size=None)] if overall else []):
        name = "all" if b["percentile"] is None else "%.2f" % b["percentile"]
        size = "" if b["max_size"] is None else fmt_size(b["max_size"])
        md.append("| %s | %s | %d | %s | %s | %s | %s |" % (
            name, size, b["flows"],
            " | ".join("%.2f" % v for v in b["ns3"]),
            " | ".join("%.2f" % v for v in b["ours"]),
            " | ".join("%.2f" % v for v in b["ratio"]),
            "PASS" if b["pass"] else "**FAIL**"))
    md.append("")
    md.append("%d of %d bins within %d %% on all three percentiles." % (
        result["bins_passed"], len(bins), round(tol * 100)))
    text = "\n".join(md) + "\n"
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
