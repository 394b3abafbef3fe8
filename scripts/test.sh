#!/usr/bin/env bash
# The test command (README): installs what the tests need, then checks formatting and
# lints and runs every test of the workspace with nextest (real sockets, PostgreSQL,
# curl, Python websockets, headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo nextest run --workspace --locked --profile ci "$@"

# --- fuzzing (issue 10; owner: helper "trust") -----------------------------------
# libFuzzer on every decoder for FUZZ_SECONDS in total (default 90), from the seed
# corpus kept in crates/wire/fuzz/seeds/; fails on any crash or broken invariant.
./scripts/fuzz.sh
# --- end fuzzing -------------------------------------------------------------------
