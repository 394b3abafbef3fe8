#!/usr/bin/env bash
# What the NATS hop costs: `myriad bench unicast` (2,000 and 10,000 msg/s) and
# `bench broadcast` (15,000 subscribers) against one process, then against a gateway
# (MYRIAD_ROLE=gateway, inherited by the bench's server) linked to a router through
# a nats-server of its own (port 14222). The router's and nats-server's CPU seconds
# over each bench come from /proc; the bench reports the gateway's own.
#
#   scripts/nats-hop.sh [OUT]     # nothing else running; default: a new temporary directory
set -euo pipefail
cd "$(dirname "$0")/.."
B=$PWD/target/release/myriad
OUT=${1:-$(mktemp -d)}
URL=nats://127.0.0.1:14222
mkdir -p "$OUT"
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
nats-server -a 127.0.0.1 -p 14222 >/dev/null 2>&1 & NATS=$!
sleep 1
"$B" serve --role router --nats $URL --store memory 2>"$OUT/router.log" & R=$!
trap 'kill $R $NATS 2>/dev/null || true' EXIT
sleep 2
run() { # name, command...
  local name=$1; shift
  local r0 n0 t0 r1 n1 t1
  r0=$(ticks $R); n0=$(ticks $NATS); t0=$(date +%s.%N)
  "$@" --out "$OUT/$name" > "$OUT/$name.txt" 2>&1
  r1=$(ticks $R); n1=$(ticks $NATS); t1=$(date +%s.%N)
  echo "$name: wall $(echo "$t1-$t0" | bc) s, router CPU $(echo "($r1-$r0)/$HZ" | bc -l | cut -c1-5) s, nats-server CPU $(echo "($n1-$n0)/$HZ" | bc -l | cut -c1-5) s" | tee -a "$OUT/cpu.txt"
}
for rate in 2000 10000; do
  run single-unicast-$rate "$B" bench unicast --unicast-rate $rate --duration 10
  run nats-unicast-$rate env MYRIAD_ROLE=gateway MYRIAD_NATS=$URL "$B" bench unicast --unicast-rate $rate --duration 10
done
run single-broadcast "$B" bench broadcast --rates 20,60,120
run nats-broadcast env MYRIAD_ROLE=gateway MYRIAD_NATS=$URL "$B" bench broadcast --rates 20,60,120
