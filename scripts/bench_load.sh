#!/usr/bin/env bash
# Load throughput: CoDEx-M, then generated wikidata-like dumps of each size, each load under
# /usr/bin/time (wall, CPU, peak RSS), also in a small memory budget (spilled runs) and, up
# to 10M triples, on one thread. docs/PERFORMANCE.md, "Load throughput and peak memory".
# Usage: scripts/bench_load.sh BIN WORKDIR ["10000000 100000000"]
#   BIN: a folder holding the k2rpq and k2rpq-bench binaries (e.g. target/release)
set -euo pipefail
BIN=$(realpath "$1"); W=$2; SIZES=${3:-10000000}
K2="$BIN/k2rpq"; GEN="$BIN/k2rpq-bench"
CODEX=$(realpath "$(dirname "$0")/../fixtures/codex/codex-m.nt.gz")
mkdir -p "$W"; cd "$W"
T='%e s wall, %U s user, %S s sys, maxrss %M KB'
echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r)"
for i in 1 2 3; do
  rm -rf cm; echo "-- codex-m run $i"; /usr/bin/time -f "$T" "$K2" load "$CODEX" --store cm --quiet
done
rm -rf cm; echo "-- codex-m, 1 thread"; RAYON_NUM_THREADS=1 /usr/bin/time -f "$T" "$K2" load "$CODEX" --store cm --quiet
for n in $SIZES; do
  echo "-- gen $n"; /usr/bin/time -f "$T" "$GEN" gen wikidata-like --triples "$n" -o "w$n.nt.gz"
  ls -la "w$n.nt.gz"
  rm -rf "s$n"; echo "-- load $n"; /usr/bin/time -f "$T" "$K2" load "w$n.nt.gz" --store "s$n" --quiet
  du -sh "s$n"
  rm -rf "s$n"; echo "-- load $n, --memory 32M (spilled runs)"; /usr/bin/time -f "$T" "$K2" load "w$n.nt.gz" --store "s$n" --quiet --memory 32M
  if [ "$n" -le 10000000 ]; then
    rm -rf "s$n"; echo "-- load $n, 1 thread"; RAYON_NUM_THREADS=1 /usr/bin/time -f "$T" "$K2" load "w$n.nt.gz" --store "s$n" --quiet
  fi
  rm -rf "s$n"
done
