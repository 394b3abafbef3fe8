#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer) of every decoder, bounded in time: the
# targets of crates/wire/fuzz (HTTP heads, routes, bodies, WebSocket frames and
# streams, HTTP/2 frames, HPACK blocks, batch and edge lists, resume positions, JWTs,
# Pusher frames and channel signatures),
# the connection core (crate `connection`; target `core` in crates/gateway/fuzz: scripts of bytes,
# bus replies, deliveries and time) and one HTTP/2 connection's frame handling
# (target `h2_conn`: frames, HPACK, budgets, flow control), and the cluster codec (crates/cluster/fuzz, target
# `cluster_codec`: what crosses NATS, parts put together included; `port_exchange`: the
# router's publish port on client bytes; `webhook_answer`: a webhook receiver's answer), and what `flood` reads from the server it
# measures (crates/load/fuzz, target `flood_scan`: its response scanner, Pusher frames included),
# and the admin listener's HTTP server, the dependency tiny_http, over loopback sockets
# (crates/observe/fuzz, target `admin_http`),
# each started
# from its seed corpus in <fuzz dir>/seeds/<target>/.
#
# Runs on the stable toolchain: libFuzzer's coverage instrumentation needs only
# stable -C flags (no sanitizer, so no nightly; safe Rust panics without ASan).
#
#   FUZZ_SECONDS=90 scripts/fuzz.sh            # total budget, split evenly (default 90)
#   scripts/fuzz.sh route jwt                  # only these targets
#
# A crash or a violated invariant fails the run and leaves the input in
# target/fuzz/artifacts/<target>-crash-*; replay it with
# target/fuzz/x86_64-unknown-linux-gnu/release/<target> <file>, then add it to the
# target's seeds/ directory so every `cargo test` replays it (tests/fuzz_strict.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
fuzz_dir=crates/wire/fuzz
triple=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_TARGET_DIR="$root/target/fuzz"
all_targets=(parse_head body_decoder ws_frame ws_stream batch edges route since jwt h2_frames hpack pusher core h2_conn cluster_codec port_exchange webhook_answer flood_scan admin_http)
# Which fuzz crate holds a target.
dir_of() {
  case "$1" in
    core|h2_conn) echo crates/gateway/fuzz ;;
    cluster_codec|port_exchange|webhook_answer) echo crates/cluster/fuzz ;;
    flood_scan) echo crates/load/fuzz ;;
    admin_http) echo crates/observe/fuzz ;;
    *) echo "$fuzz_dir" ;;
  esac
}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
total=${FUZZ_SECONDS:-90}
per=$(( (total + ${#targets[@]} - 1) / ${#targets[@]} ))

echo "fuzz: building ${#targets[@]} libFuzzer targets (stable, $triple)"
for dir in $(for t in "${targets[@]}"; do dir_of "$t"; done | sort -u); do
  (
    cd "$dir"
    # --target keeps the instrumentation flags off build scripts and proc macros.
    RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks" \
      cargo build --release --locked --bins --target "$triple" --quiet
  )
done
bin="$CARGO_TARGET_DIR/$triple/release"
artifacts="$CARGO_TARGET_DIR/artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$artifacts"
started=$SECONDS
for t in "${targets[@]}"; do
  seeds="$(dir_of "$t")/seeds/$t"
  [ -d "$seeds" ] || { echo "fuzz: no seed corpus $seeds" >&2; exit 1; }
  mkdir -p "$work/$t"
  log="$work/$t.log"
  # New inputs go to the first (scratch) directory; the seeds are read only.
  if ! "$bin/$t" "$work/$t" "$seeds" -max_total_time="$per" -max_len=4096 -timeout=10 \
      -rss_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz: $t FAILED; input saved under $artifacts/" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
  echo "fuzz: $t ok: ${runs:-?} runs in ${per}s, $cov, corpus $(ls "$work/$t" | wc -l) new inputs"
done
echo "fuzz: ${#targets[@]} targets, 0 crashes, $(( SECONDS - started ))s of fuzzing"
