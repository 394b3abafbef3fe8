#!/bin/bash
# Unicast latency, router shards 1 vs 2, interleaved: serve --processes 2
# --router-shards K, 10,000 stream connections (users 1-10000), msggen 2,000 msg/s to
# uniform users for 10 s. Usage: scripts/shards-latency.sh OUTDIR (nothing else running)
# (release build; ports 7400, 14223).
set -u
M=${MYRIAD:-$(dirname "$0")/../target/release/myriad}; M=$(realpath "$M")
OUT=${1:-/tmp/gwkill/shards}
mkdir -p "$OUT"; cd "$OUT"
for run in 1 2 3 4; do
  K=$(( (run + 1) % 2 + 1 ))
  D=$OUT/run$run-k$K; mkdir -p $D
  MYRIAD_LOG=warn $M serve --processes 2 --router-shards $K --listen 127.0.0.1:7400 --store memory \
    --nats nats://127.0.0.1:14223 --max-connections 30000 > $D/server.out 2> $D/server.log &
  SUP=$!
  sleep 4
  $M flood --url 'http://127.0.0.1:7400/sub/%d' -n 10000 --users 1-10000 --rate 10000 --hold 18 \
    --json --quiet > $D/flood.json 2> $D/flood.err &
  F=$!
  sleep 5
  $M msggen --url http://127.0.0.1:7400 --rate 2000 --max 10000 --duration 10 > $D/msggen.out 2>&1
  uptime > $D/uptime.txt
  wait $F
  kill $SUP; wait $SUP
  python3 -c "import json; d=json.load(open('$D/flood.json')); print('K=$K', d['messages'], d['lat_p50_us'], d['lat_p99_us'], d['lat_max_us'])" | tee -a $OUT/summary.txt
  tail -1 $D/msggen.out | tee -a $OUT/summary.txt
  cat $D/uptime.txt | tee -a $OUT/summary.txt
done
