#!/usr/bin/env python3
"""The capacity model of docs/scale.md, from the measured inputs in capacity.toml.

    scripts/capacity.py                  # the tables of docs/scale.md (markdown)
    scripts/capacity.py --hold N         # what holding N connections on the measuring
                                         # box (clients on it) should cost: to check
                                         # the model against a run it was not fitted on

Per connection: user and kernel memory, and the server's share of a heartbeat. Per
delivery: gateway CPU. Per publish: nats-server CPU per message crossing it, router
CPU. From them, for 10 M and 100 M connections and each workload: gateway hosts
(and whether memory or CPU bounds them), router shards, NATS messages, bytes and
nodes, and which component saturates first.
"""

import argparse
import math
import pathlib
import tomllib

HERE = pathlib.Path(__file__).resolve().parent


def load(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def per_conn_cpu_us(m, w):
    """Gateway CPU-µs per second one connection costs under workload `w`: holding it
    (its beats, or the workload's own `hold_us` where it has no beats: long-polls
    renewed), its deliveries, and its share of the publishes where each costs
    `publish_us` more (a client's own publish over HTTP)."""
    c, d = m["connection"], m["delivery"]
    beat = c["beat_box_us"] * c["beat_server_share"] / c["heartbeat_s"]
    rate = w["deliveries_per_conn_per_s"]
    hold = w.get("hold_us", beat)
    return hold + rate * d["fanout_us"] + rate / w["fanout"] * w.get("publish_us", 0)


def plan(m, w, n):
    """Hosts, shards and NATS for `n` connections under workload `w`."""
    c, d, h = m["connection"], m["delivery"], m["host"]
    # A client of some workloads holds more than one socket (sprites: its poll and
    # its sender's keep-alive connection).
    conn_bytes = c["user_bytes"] + c["kernel_bytes"] * w.get("sockets_per_conn", 1)
    rate = w["deliveries_per_conn_per_s"]
    by_memory = h["use"] * h["memory_gb"] * 2**30 / conn_bytes
    by_cpu = h["use"] * h["cores"] * 1e6 / per_conn_cpu_us(m, w)
    per_host = min(by_memory, by_cpu)
    gateways = math.ceil(n / per_host)
    publishes = n * rate / w["fanout"]
    # Recipients on random hosts: the distinct gateways one publish reaches.
    touched = gateways * (1 - (1 - 1 / gateways) ** w["fanout"])
    messages = publishes * (1 + touched)
    nats_us = d["unicast_all_us"] * d["unicast_nats_share"] / d["unicast_nats_messages"]
    nats_cores = messages * nats_us / 1e6
    nats_nodes = max(3, math.ceil(nats_cores / (h["use"] * h["cores"])))
    router_us = d["unicast_all_us"] * (1 - d["unicast_nats_share"]) / 2
    shards = max(1, math.ceil(publishes * router_us / 1e6 / (h["router_shard_cores"] * h["use"])))
    nats_bytes = publishes * (w["payload_bytes"] + 64) + messages * 64 + n * rate * 6
    return {
        "gateways": gateways,
        "bound": "memory" if by_memory < by_cpu else "CPU",
        "per_host": per_host,
        "memory_tb": n * conn_bytes / 2**40,
        "publishes": publishes,
        "messages": messages,
        "nats_mb": nats_bytes / 1e6,
        "nats_nodes": nats_nodes,
        "nats_cores": nats_cores,
        "shards": shards,
    }


def first_to_saturate(p, h):
    """The component whose hosts run out first as the load grows."""
    ratios = {
        "gateway " + p["bound"]: p["gateways"],
        "nats-server CPU": p["nats_cores"] / (h["use"] * h["cores"]),
        "router shards": p["shards"],
    }
    return max(ratios, key=ratios.get)


def count(x):
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if x >= div:
            return f"{x / div:.1f} {unit}".replace(".0 ", " ")
    return f"{x:.0f}"


def markdown(m):
    h = m["host"]
    out = [
        f"Hosts of {h['cores']} cores and {h['memory_gb']} GB, "
        f"{h['use']:.0%} of each planned for use.",
        "",
    ]
    for w in m["workload"]:
        out += [
            f"**{w['name']}**: {w['about']} (each connection gets "
            f"{w['deliveries_per_conn_per_s']:g} deliveries/s, a publish reaches "
            f"{w['fanout']} connections, {w['payload_bytes']}-byte payloads).",
            "",
            "| connections | gateway hosts (bound) | memory | publishes/s | NATS messages/s | "
            "NATS MB/s | nats-server nodes | router shards | saturates first |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for n in w.get("connections", (10_000_000, 100_000_000)):
            p = plan(m, w, n)
            out.append(
                f"| {count(n)} | {p['gateways']} ({p['bound']}, {count(p['per_host'])} each) | "
                f"{p['memory_tb']:.2f} TiB | {count(p['publishes'])} | {count(p['messages'])} | "
                f"{p['nats_mb']:.0f} | {p['nats_nodes']} | {p['shards']} | "
                f"{first_to_saturate(p, h)} |"
            )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def hold(m, n):
    """Holding `n` idle connections with beats, clients on the measuring box."""
    c = m["connection"]
    cpu = n / c["heartbeat_s"] * c["beat_box_us"] / 1e6 * 100
    return (
        f"holding {count(n)} with {c['heartbeat_s']}-s beats on the measuring box: "
        f"whole-box CPU for the beats ≈ {cpu:.0f} % of a core, "
        f"user space ≈ {c['user_bytes']} B a connection "
        f"({n * c['user_bytes'] / 2**20:.0f} MiB), kernel ≈ {n * c['kernel_bytes'] / 2**20:.0f} MiB"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", default=HERE / "capacity.toml")
    ap.add_argument("--hold", type=int, help="predict holding N connections on the measuring box")
    args = ap.parse_args()
    m = load(args.inputs)
    print(hold(m, args.hold) if args.hold else markdown(m), end="" if not args.hold else "\n")


if __name__ == "__main__":
    main()
