#!/usr/bin/env bash
# A short device check (session 2's last run): the GPU tests the kept-scratch fix touches,
# cnr-2000 `<c> p+ ?y` GPU vs Oxigraph, CoDEx-M negated-set queries, then gpu_engine.
set -uo pipefail
c=.carry/device; b=$c/bin; k=$b/k2rpq; o=${OUT:-/tmp/o}; mkdir -p "$o"; t=/tmp/k2f; mkdir -p "$t"
s() { echo "=== $*" | tee -a "$o/summary.txt"; }
for x in rpq_gpu sparql_gpu gpu_multi; do
  s "test $x"; timeout 60 "$b/$x" --test-threads=1 > "$o/test-$x.log" 2>&1 && grep -E '^test result' "$o/test-$x.log" | tee -a "$o/summary.txt" || { echo FAILED | tee -a "$o/summary.txt"; grep -E "panicked|failed" "$o/test-$x.log" | head -5; }
done
zcat $c/data/cnr-2000.arcs.tsv.gz | scripts/tsv-to-nt.sh > $t/cnr.nt; $k load $t/cnr.nt --store $t/cnr.store --quiet 2>&1 | tail -1
grep -E '^fwd' sparql/cnr-2000.rpq > $t/fwd.rpq
s "cnr-2000 <c> p+ ?y: gpu vs oxigraph"
timeout 130 $k bench --store $t/cnr.store --queries $t/fwd.rpq --engines gpu,oxigraph --repeats 2 --warmup 0 --timeout 20 --quiet --json "$o/fwd.json" > "$o/fwd.txt" 2>&1; tail -6 "$o/fwd.txt" | tee -a "$o/summary.txt"
$k explain --store $t/cnr.store --engine gpu '<urn:k2rpq:n:18490> <urn:k2rpq:p>+ ?y' > "$o/explain-fwd01.txt" 2>&1; grep -E "^engine" "$o/explain-fwd01.txt" | tee -a "$o/summary.txt"
$k load fixtures/codex/codex-m.nt.gz --store $t/cm.store --quiet > /dev/null 2>&1
grep -E '^(q14|q27|q37|q16|q03)' sparql/codex-m.rpq > $t/neg.rpq
s "CoDEx-M q03 q14 q16 q27 q37: cpu vs oxigraph"
timeout 40 $k bench --store $t/cm.store --queries $t/neg.rpq --engines cpu,oxigraph --repeats 21 --quiet 2>&1 | grep -E "^q" | tee -a "$o/summary.txt"
s "test gpu_engine"; timeout 100 "$b/gpu_engine" --test-threads=1 > "$o/test-gpu_engine.log" 2>&1; tail -3 "$o/test-gpu_engine.log" | tee -a "$o/summary.txt"
