#!/usr/bin/env bash
# Line lists at 100M triples: generates and loads the wikidata-like store, then runs its
# workload on the CPU engine warm (one untimed run builds the lists) and cold, with
# BIN/k2rpq-bench and, where present, BIN/k2rpq-bench-base (another build, for a
# before/after in one call).
# Usage: scripts/lines-100m.sh BIN OUT [TRIPLES]   (BIN holds k2rpq and k2rpq-bench)
set -u
bin="$1"; out="$2"; n="${3:-100000000}"; t="${TMPDIR:-/tmp}/lines-w100"
mkdir -p "$out"; nproc | tee "$out/nproc.txt"
q=sparql/wikidata-like-100m.rpq
[ "$n" = 100000000 ] || q="$t.rpq"
( time "$bin/k2rpq-bench" gen wikidata-like --triples "$n" -o "$t.nt" --workload "$t.rpq" ) >"$out/gen.txt" 2>&1
( time "$bin/k2rpq" load "$t.nt" --store "$t.store" --quiet ) >"$out/load.txt" 2>&1
rm -f "$t.nt"
run() { # name, binary, workload flags
    [ -x "$bin/$2" ] || { echo "no $bin/$2: $1 skipped"; return 0; }
    ( time timeout 150 "$bin/$2" workload --store "$t.store" --queries "$q" --engines cpu --timeout 10 "${@:3}" ) >"$out/$1.txt" 2>&1
    grep -E "^k2rpq-cpu  |line lists|^real" "$out/$1.txt"
}
run warm-new k2rpq-bench --repeats 3 --warmup 1
run warm-base k2rpq-bench-base --repeats 3 --warmup 1
run cold-new k2rpq-bench --repeats 1 --warmup 0
