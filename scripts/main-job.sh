#!/usr/bin/env bash
# The main job: build k2rpq, load the bundled CoDEx-M dataset into a store and run the
# CoDEx-M property-path workload on k2rpq (GPU if one is usable, and CPU) and on
# Oxigraph side by side. Ends with the summary table. Extra arguments go to
# `k2rpq-bench workload` (e.g. `--repeats 20`).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p k2rpq-cli -p k2rpq-bench
bin=target/release
store=target/codex-m.store
rm -rf "$store"
"$bin/k2rpq" load fixtures/codex/codex-m.nt.gz --store "$store"
"$bin/k2rpq" info "$store" > target/codex-m.info.txt
head -n 4 target/codex-m.info.txt
"$bin/k2rpq-bench" workload --store "$store" --queries sparql/codex-m.rpq --stats \
    --json target/bench-codex-m.json --csv target/bench-codex-m.csv --svg target/bench-codex-m.svg "$@"
echo "Per-query results: target/bench-codex-m.{json,csv,svg}"
