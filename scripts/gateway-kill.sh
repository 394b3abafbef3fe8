#!/bin/bash
# Gateway kill under flood --reconnect: serve --processes 3, SSE + WebSocket floods
# (5,000 each, users 1-5000), msggen 1,000 msg/s to users 1-5000, kill -9 the fullest
# gateway 10 s into publishing. Usage: scripts/gateway-kill.sh OUTDIR (nothing else running)
# (release build; ports 7300, 19800, 14222).
set -u
M=${MYRIAD:-$(dirname "$0")/../target/release/myriad}; M=$(realpath "$M")
OUT=${1:-/tmp/gwkill/out}
rm -rf "$OUT"; mkdir -p "$OUT"; cd "$OUT"
MYRIAD_LOG=info MYRIAD_LOG_FORMAT=text NO_COLOR=1 $M serve --processes 3 --listen 127.0.0.1:7300 \
  --admin 127.0.0.1:19800 --store memory --nats nats://127.0.0.1:14222 --max-connections 30000 \
  --history 256 > server.out 2> server.log &
SUP=$!
sleep 4
$M flood --url 'http://127.0.0.1:7300/sse/%d' --transport sse -n 5000 --users 1-5000 --rate 5000 \
  --reconnect --hold 45 --csv sse.csv --json --quiet > sse.json 2> sse.err &
F1=$!
$M flood --url 'http://127.0.0.1:7300/ws/%d' --transport ws -n 5000 --users 1-5000 --rate 5000 \
  --reconnect --hold 45 --csv ws.csv --json --quiet > ws.json 2> ws.err &
F2=$!
sleep 6
curl -s 127.0.0.1:19800/stats > before.json
$M msggen --url http://127.0.0.1:7300 --rate 1000 --max 5000 --duration 25 > msggen.out 2>&1 &
G=$!
sleep 10
VICTIM=$(python3 -c "
import json; d=json.load(open('before.json'))['extra']['processes']
g=[p for p in d if p['role'].startswith('gateway')]; v=max(g,key=lambda p:p['connections']); print(v['pid'], v['connections'])")
echo "victim pid/connections: $VICTIM" > kill.txt
date +%s.%N >> kill.txt
kill -9 ${VICTIM%% *}
uptime >> kill.txt
wait $G; wait $F1; wait $F2
uptime >> kill.txt
curl -s 127.0.0.1:19800/stats > after.json
kill $SUP; wait $SUP
