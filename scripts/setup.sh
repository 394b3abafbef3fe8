#!/usr/bin/env bash
# Installs what myriad's tests need on a fresh Debian machine (run as root; idempotent):
# curl, Chromium and a font for the dashboard/plot tests, nginx with nchan (the bench's
# peer), Python `websockets`, the npm packages of the browser test, of the Pusher tests and of clients/js's tests, the sysctls that loopback connect storms need, starts
# PostgreSQL if it is installed but stopped, and creates the user `postgres` and the
# database `test` the PostgreSQL tests use when they are missing.
#
# `scripts/setup.sh --bench-peers` also installs the Pusher peers of `myriad bench
# pusher`: Sockudo (`cargo install sockudo --locked`, with protoc; a long build, so not
# for the tests or CI) and tries soketi's npm package (its uWebSockets.js comes from
# GitHub: where that is out of reach it says so and goes on).
set -euo pipefail
cd "$(dirname "$0")/.."
bench_peers=0
[ "${1:-}" = "--bench-peers" ] && bench_peers=1

need_apt=()
command -v curl >/dev/null || need_apt+=(curl)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v certutil >/dev/null || need_apt+=(libnss3-tools)  # a test CA in Chromium's NSS store (tls_browser)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_apt+=(fonts-dejavu-core)
[ -f /usr/lib/nginx/modules/ngx_nchan_module.so ] || need_apt+=(nginx-light libnginx-mod-nchan)  # bench --peer nchan
[ $bench_peers = 1 ] && ! command -v protoc >/dev/null && need_apt+=(protobuf-compiler)  # Sockudo's build
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

python3 -c 'import websockets, h2' 2>/dev/null || {
  echo "setup: pip install -r tests/requirements.txt"
  python3 -m pip install -q -r tests/requirements.txt
}

if [ -f crates/observe/tests/browser/package.json ] && [ ! -d crates/observe/tests/browser/node_modules ]; then
  echo "setup: npm ci (browser test)"
  (cd crates/observe/tests/browser && npm ci --silent --no-audit --no-fund)
fi
if [ ! -d tests/pusher/node_modules ]; then
  echo "setup: npm ci (the Pusher tests' real clients: pusher-js, pusher)"
  (cd tests/pusher && npm ci --silent --no-audit --no-fund)
fi
if [ ! -d clients/js/node_modules ]; then
  echo "setup: npm ci (clients/js's test dependencies: ws, eventsource)"
  (cd clients/js && npm ci --silent --no-audit --no-fund)
fi

if [ $bench_peers = 1 ]; then
  if ! command -v sockudo >/dev/null && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/sockudo" ]; then
    echo "setup: cargo install sockudo --locked (bench pusher --peer sockudo; a long build)"
    cargo install sockudo --locked
  fi
  # bench pusher --peer soketi installs @soketi/soketi into its own directory on first
  # use; this says early whether npm can reach its uWebSockets.js (on GitHub).
  if ! npm view @soketi/soketi version >/dev/null 2>&1 || \
     ! (d=$(mktemp -d) && cd "$d" && npm install --no-audit --no-fund --silent @soketi/soketi@1.6.1 >/dev/null 2>&1; r=$?; rm -rf "$d"; exit $r); then
    echo "setup: soketi does not install here (npm could not fetch it or its uWebSockets.js from GitHub); bench pusher --peer soketi will say so"
  fi
fi

# Loopback connect storms: the accept and SYN backlogs must hold a burst of thousands.
raise() { local key=$1 want=$2; local have; have=$(sysctl -n "$key" 2>/dev/null || echo 0)
  if [ "$have" -lt "$want" ]; then sysctl -q -w "$key=$want" && echo "setup: sysctl $key=$want (was $have)" || echo "setup: could not raise $key (have $have)"; fi; }
raise net.core.somaxconn 65535
raise net.ipv4.tcp_max_syn_backlog 65535
raise net.core.netdev_max_backlog 65535

if command -v pg_ctlcluster >/dev/null && ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
  echo "setup: starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
fi

# The PostgreSQL tests connect to postgres://postgres@127.0.0.1:5432/test (trust for
# 127.0.0.1, Debian's default pg_hba.conf for local clusters). As the postgres OS user,
# over the local socket: create what is missing, change nothing that exists.
pg_up() { (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
if command -v psql >/dev/null && id postgres >/dev/null 2>&1; then
  for _ in $(seq 50); do pg_up && break; sleep 0.2; done
  if pg_up; then
    pg_sql() { runuser -u postgres -- psql -X -q -d postgres -tAc "$1"; }
    if [ "$(pg_sql "SELECT 1 FROM pg_roles WHERE rolname = 'postgres'")" != 1 ]; then
      echo "setup: creating PostgreSQL user postgres"
      pg_sql "CREATE ROLE postgres SUPERUSER LOGIN"
    fi
    if [ "$(pg_sql "SELECT 1 FROM pg_database WHERE datname = 'test'")" != 1 ]; then
      echo "setup: creating PostgreSQL database test"
      runuser -u postgres -- createdb -O postgres test
    fi
  else
    echo "setup: PostgreSQL does not answer on 127.0.0.1:5432; the PostgreSQL tests will fail"
  fi
fi
