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
