#!/bin/bash
# Graph-publish latency and index memory, router shards 1 vs 2, interleaved (K = 1, 2,
# 1, 2): a Barabási–Albert friends graph of $USERS users (m = 15, undirected: ~30
# follow edges per user) bulk-loaded into SQLite once; serve --processes 2
# --router-shards K over it; 10,000 stream connections (users 1-10000); msggen
# $RATE msg/s for 10 s to power-law subjects 1-10000 (exponent 0.5: each publish
# reaches the subject and its followers, ~100 on average). Per run: delivery latency
# (flood), publish round trip and deliveries reported (msggen), deliveries received,
# and each router's follower-index edges and bytes (its `myriad.router.stats`
# answer) and RSS (the supervisor's /stats).
# Usage: scripts/shards-graph-latency.sh OUTDIR (nothing else running)
# (release build; ports 7400, 7401, 14223).
set -u
M=${MYRIAD:-$(dirname "$0")/../target/release/myriad}; M=$(realpath "$M")
OUT=${1:-/tmp/shards-graph}
USERS=${USERS:-100000}
RATE=${RATE:-300}
mkdir -p "$OUT"; cd "$OUT"
DB=$OUT/graph.db
if [ ! -s "$DB" ]; then
  $M friends gen --users $USERS --m 15 --seed 1 --out $OUT/friends.txt
  $M friends load $OUT/friends.txt --store sqlite:$DB
  rm -f $OUT/friends.txt
fi
# Every router's answer to myriad.router.stats (NATS text protocol), one JSON a line.
router_stats() {
  python3 - <<'PY'
import socket, time
s = socket.create_connection(("127.0.0.1", 14223)); s.settimeout(0.2)
s.sendall(b'CONNECT {"verbose":false}\r\nSUB _INBOX.st 1\r\nPUB myriad.router.stats _INBOX.st 0\r\n\r\n')
buf, end = b"", time.time() + 1.5
while time.time() < end:
    try:
        chunk = s.recv(65536)
        if not chunk: break
        buf += chunk
    except socket.timeout:
        pass
lines = buf.split(b"\r\n")
for i, l in enumerate(lines):
    if l.startswith(b"MSG _INBOX.st"):
        print(lines[i + 1].decode())
PY
}
for run in 1 2 3 4; do
  K=$(( (run + 1) % 2 + 1 ))
  D=$OUT/run$run-k$K; mkdir -p $D
  MYRIAD_LOG=warn $M serve --processes 2 --router-shards $K --listen 127.0.0.1:7400 \
    --admin 127.0.0.1:7401 --store sqlite:$DB --nats nats://127.0.0.1:14223 \
    --max-connections 30000 > $D/server.out 2> $D/server.log &
  SUP=$!
  # Until every router loaded its part of the index (bounded: 60 s).
  for i in $(seq 60); do
    sleep 1
    [ "$(router_stats | wc -l)" -ge $K ] && break
  done
  $M flood --url 'http://127.0.0.1:7400/sub/%d' -n 10000 --users 1-10000 --rate 10000 --hold 18 \
    --json --quiet > $D/flood.json 2> $D/flood.err &
  F=$!
  sleep 5
  $M msggen --url http://127.0.0.1:7400 --rate $RATE --max 10000 --dist power --exponent 0.5 \
    --duration 10 --publishers 8 --json --quiet > $D/msggen.json 2> $D/msggen.err
  router_stats > $D/routers.jsonl
  curl -s http://127.0.0.1:7401/stats > $D/supervisor.json
  uptime > $D/uptime.txt
  wait $F
  kill $SUP; wait $SUP
  python3 - "$D" "$K" <<'PY' | tee -a $OUT/summary.txt
import json, sys
d, k = sys.argv[1], sys.argv[2]
f = json.load(open(f"{d}/flood.json"))
m = json.load(open(f"{d}/msggen.json"))
routers = [json.loads(l) for l in open(f"{d}/routers.jsonl") if l.strip()]
sup = json.load(open(f"{d}/supervisor.json"))
procs = sup.get("extra", sup).get("processes", sup.get("processes", []))
rss = {p.get("role"): p.get("rss_bytes") for p in procs if str(p.get("role", "")).startswith("router")}
print(f"K={k} received={f['messages']} reported={m['deliveries']} sent={m['sent']} errors={m['errors']} "
      f"lat_p50/p99/max_us={f['lat_p50_us']}/{f['lat_p99_us']}/{f['lat_max_us']} "
      f"rtt_p50/p99_us={m['rtt_p50_us']}/{m['rtt_p99_us']}")
for r in sorted(routers, key=lambda r: r.get("router_shard", 0)):
    print(f"  shard {r.get('router_shard')}: edges={r.get('subscription_edges')} index_bytes={r.get('index_bytes')} "
          f"messages_in={r.get('messages_in')}")
print(f"  router RSS: {rss}")
PY
  cat $D/uptime.txt | tee -a $OUT/summary.txt
done
