#!/usr/bin/env bash
# The test command (README): installs what the tests need, then checks formatting and
# lints, runs every test of the workspace with nextest (real sockets, PostgreSQL, curl,
# Python websockets, headless Chromium), the JavaScript client's tests (clients/js), and
# installs the binary as the README says.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo nextest run --workspace --locked --profile ci "$@"
# The JavaScript client's tests, against the debug binary nextest just built.
MYRIAD_BIN="$PWD/target/debug/myriad" npm test --prefix clients/js

# The README's install command, for real: a release build installed into a temporary
# root, whose binary must run and name the commit it was built from.
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
cargo install --path crates/myriad --locked --root "$root" --quiet
version=$("$root/bin/myriad" --version)
want="($(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
case "$version" in
  "myriad "*" $want") echo "test.sh: installed $version" ;;
  *) echo "test.sh: the installed myriad says '$version', expected 'myriad <version> $want'" >&2; exit 1 ;;
esac

# --- fuzzing (issue 10; owner: helper "trust") -----------------------------------
# libFuzzer on every decoder for FUZZ_SECONDS in total (default 90), from the seed
# corpus kept in crates/wire/fuzz/seeds/ and crates/gateway/fuzz/seeds/; fails on
# any crash or broken invariant.
./scripts/fuzz.sh
# --- end fuzzing -------------------------------------------------------------------
