#!/usr/bin/env bash
# Line lists at 100M (docs/BENCHMARKS.md, "Line lists for large relations (session 4)"):
# generates and loads the 100M wikidata-like store, then runs the CPU engine's bench warm
# and cold with binaries BIN/k2rpq (this branch) and BIN/k2rpq-base (before), and
# BIN/lines_build (descent and build costs per relation, parallel lists checked against
# the sequential build). Usage: scripts/lines-100m.sh BIN OUT [TRIPLES]
set -u
bin="$1"; out="$2"; n="${3:-100000000}"; t="${TMPDIR:-/tmp}/lines-w100"
[ -x "$bin/k2rpq-base" ] || echo "no $bin/k2rpq-base: the base rows will be missing"
mkdir -p "$out"; nproc | tee "$out/nproc.txt"
q=sparql/wikidata-like-100m.rpq
[ "$n" = 100000000 ] || q="$t.rpq"
( time "$bin/k2rpq" gen wikidata-like --triples "$n" -o "$t.nt" --workload "$t.rpq" ) >"$out/gen.txt" 2>&1
( time "$bin/k2rpq" load "$t.nt" --store "$t.store" --quiet ) >"$out/load.txt" 2>&1
rm -f "$t.nt"
run() { # name, binary, bench flags
    ( time timeout 150 "$bin/$2" bench --store "$t.store" --queries "$q" --engines cpu --timeout 10 "${@:3}" ) >"$out/$1.txt" 2>&1
    grep -E "^k2rpq-cpu  |line lists|^real" "$out/$1.txt"
}
run warm-new k2rpq --repeats 3 --warmup 1
run warm-base k2rpq-base --repeats 3 --warmup 1
run cold-new k2rpq --repeats 1 --warmup 0
timeout 200 "$bin/lines_build" "$t.store" 2000 >"$out/lines_build.txt" 2>&1; tail -13 "$out/lines_build.txt"
