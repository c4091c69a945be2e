#!/usr/bin/env bash
# The GPU test suite and the benchmarks, run on the lent device machine.
#
#   scripts/device-suite.sh --build           # here: release binaries + GPU test binaries + data
#                                             # into .carry/device (git-ignored, < 64 MiB)
#   bash .carry/device/device-suite.sh --device [PARTS]   # there (the device tool's `run`,
#                                             # carry [".carry/device"]); logs into $OUT
#
# PARTS (default: tests codex spmv cnr): any of
#   tests   every carried GPU test binary (--test-threads=1; TESTS="a b": only these,
#           TEST_ARGS: passed to each, e.g. "--skip cnr_2000_timings")
#   spmv    k2rpq bench-spmv on cnr-2000 (SPMV_ARGS: more arguments)
#   spmvweb k2rpq bench-spmv on a 200M-edge web-like graph (SPMVWEB_BATCHES: f32 widths)
#   spmvcopies k2rpq bench-spmv on cnr-2000 x SPMVCOPIES (default 64) copies along the
#           diagonal: a 206M-edge graph with a real crawl's clustering (SPMVWEB_BATCHES,
#           SPMVWEB_KERNELS as spmvweb)
#   descent tree-only descents of web 200M per DESCENT_FUSED (default 1,3) levels per expand
#           step (and per DESCENT_KERNEL_DIRS folder, DESCENT_WARP_CHUNKS count and
#           DESCENT_TOP_NODES log2 top-level bound): plans,
#           device times, y checked, and ncu's per-kernel sums of one product each
#           (DESCENT_NCU_FUSED: which of them ncu profiles; DESCENT_NCU=0: none);
#           DESCENT_CNR=1: cnr-2000 as well, DESCENT_WEB=0: cnr-2000 alone,
#           DESCENT_COPIES=64: cnr-2000 x 64 as well
#   headers bit-packed right products over 4x4 and 8x4 header-run windows against the
#           engine's (examples/header_runs.rs: issue 10, session 18), cnr-2000 and web 200M
#   leaves  profile_leaves (leaf kernels alone, web 200M) per frontier layout, and ncu if present
#           (LEAVES_OP=bits: a bit-packed batch of 64 instead of an f32 vector)
#   codex   the main job: load CoDEx-M, k2rpq bench on sparql/codex-m.rpq (gpu, cpu, oxigraph)
#   cnr     RPQ benchmark on cnr-2000 (100 constants; all pairs on the GPU vs Oxigraph)
#   latency cnr-2000 constants on the GPU vs Oxigraph (issue 6) and CoDEx-M on the CPU vs
#           Oxigraph (issue 9), with bin/k2rpq-base (if carried: K2RPQ_BASE=path at --build)
#           run the same way first, for before/after in one run; explain traces of one query
#   wd      gen wikidata-like (WD_TRIPLES, default 100M) + its workload, load, bench gpu,cpu,oxigraph
#           (Oxigraph's load overlapped, --warmup 0 --repeats WD_REPEATS=1 --timeout WD_TIMEOUT=10);
#           between load and bench, `k2rpq lines` keeps the line lists (WD_LINES=0: not)
#   wdtrace wikidata-like 100M: load (timed), explain traces of small constant queries on
#           the GPU and the CPU (where a device query's fixed cost goes)
#   build   bench-build on cnr-2000 and a 1G-edge web-like graph
#   cache   bench-cache --engine gpu at 100/50/10% budgets
#   multi   several GPUs: the gpu_multi test binary, bench --scaling on cnr-2000 (all pairs,
#           batched var→var, 100 constants) and bench-spmv --gpus all on a 200M-edge web graph
#   load    load throughput (issue 5): gen wikidata-like 20M (.nt and .nt.gz) and 100M (.nt),
#           load each under /usr/bin/time; prints statements/s end to end and per CPU-second
#   fwd     cnr-2000 `<c> p+ ?y`: gpu (auto), cpu and Oxigraph (2 repeats), then the GPU with
#           every product on the device (--no-host-walk), and one explain trace
#   layouts cnr-2000 `<c> p+ ?y` and `?x p* <c>` on the GPU, every product on the device,
#           with --frontier-layout rowblocks, colblocks and both
#   lines   line lists at 100M (session 4): scripts/lines-100m.sh with bin/k2rpq, bin/k2rpq-base
#           (K2RPQ_BASE at --build) and bin/lines_build: bench cpu warm (new, base) and cold
#           (new), then per-relation descent/build costs on all cores (~5-7 minutes)
#   quick   a ~3-minute check: the rpq_gpu, sparql_gpu and gpu_multi tests, fwd, five
#           CoDEx-M queries, then gpu_engine
#   rowwin  the engine's bit-packed right kernel from each ROWWIN_DIRS folder (default
#           base=HEAD's cuda/, tree=this tree's) beside ROWWIN_KERNELS of the experiment over
#           the same row windows (header_runs: cnr-2000, then web 200M unless ROWWIN_WEB=0),
#           and ncu's warm kernel durations of each on cnr-2000 (session 21)
#   spmvab  bench-spmv on cnr-2000 per SPMVAB="tree:200 tree:0" (kernel folder : --hold-us)
#   spmvbase bench-spmv with bin/k2rpq-base and bin/k2rpq in turn (K2RPQ_BASE at --build):
#           cnr-2000 SPMVBASE_ROUNDS (2) times each, then the web graph once each
#           (SPMVBASE_WEB=0: not), for a host and kernel change's before/after in one call
#   groups  bit-packed right products over row groups (examples/row_groups.rs: issue 10,
#           session 31) against the engine's row windows, y checked: cnr-2000, cnr-2000 x 64
#           (GROUPS_COPIES=0: not) and web 200M (GROUPS_WEB=0: not); ROW_GROUPS_ITERS,
#           ROW_GROUPS_SIGMA and ROW_GROUPS_KERNELS pick the layouts and kernels
#   profile where cnr-2000's bit-packed right product spends its time, warm: ncu (full set)
#           of rowwindows_bits (PROFILE_KERNEL=rowgroups_bits: the row groups') inside
#           bench-spmv (nsys is not installed on the device machine)
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
if [ -d "$here/bin" ]; then carry="$here"; root="$(cd "$here/../.." && pwd)"; else carry="$root/.carry/device"; fi

case "${1:-}" in
--build)
    set -e
    cd "$root"
    mkdir -p "$carry/bin" "$carry/data"
    rm -f "$carry"/bin/*
    tests=$(ls tests/*.rs | xargs -n1 basename | sed 's/\.rs$//' | grep -E '^gpu_|_gpu$' | sed 's/^/--test /' | tr '\n' ' ')
    # shellcheck disable=SC2086
    cargo test --release $tests --no-run --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])
' | while read -r exe; do cp "$exe" "$carry/bin/$(basename "$exe" | sed 's/-[0-9a-f]*$//')"; done
    cargo build --release --bin k2rpq
    cp target/release/k2rpq "$carry/bin/k2rpq"
    if [ -n "${K2RPQ_BASE:-}" ]; then cp "$K2RPQ_BASE" "$carry/bin/k2rpq-base"; fi
    cargo build --release --example lines_build && cp target/release/examples/lines_build "$carry/bin/lines_build"
    cargo build --release --example profile_leaves && cp target/release/examples/profile_leaves "$carry/bin/profile_leaves"
    cargo build --release --example header_runs && cp target/release/examples/header_runs "$carry/bin/header_runs"
    cargo build --release --example descent_profile && cp target/release/examples/descent_profile "$carry/bin/descent_profile"
    cargo build --release --example row_groups && cp target/release/examples/row_groups "$carry/bin/row_groups"
    for d in "$root/../shared/data" "$root/../../shared/data" "${K2RPQ_DATA:-/nonexistent}"; do
        if [ -f "$d/cnr-2000/cnr-2000.arcs.tsv.gz" ]; then cp "$d/cnr-2000/cnr-2000.arcs.tsv.gz" "$carry/data/"; break; fi
    done
    # Kernel sources for `rowwin` and `spmvab` (engine kernels A/B in one process): this
    # tree's (`tree`) and those of git revision KERNELS_BASE (default HEAD: `base`).
    rm -rf "$carry/kernels"; mkdir -p "$carry/kernels/tree" "$carry/kernels/base"
    cp -r cuda/. "$carry/kernels/tree/"
    git archive "${KERNELS_BASE:-HEAD}" cuda | tar -x --strip-components=1 -C "$carry/kernels/base"
    cp "$root/scripts/device-suite.sh" "$carry/device-suite.sh"
    du -sh "$carry"; ls -l "$carry/bin"
    ;;
--device)
    shift
    parts="${*:-tests codex spmv cnr}"
    out="${OUT:-$carry/out}"; mkdir -p "$out"
    bin="$carry/bin"; k2="$bin/k2rpq"; cnr="$carry/data/cnr-2000.arcs.tsv.gz"
    export K2RPQ_CNR2000="$cnr" K2RPQ_DATA="$carry/data" NCCL_NVLS_ENABLE=0
    export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    tmp="${TMPDIR:-/tmp}/k2rpq-device"; mkdir -p "$tmp"
    cd "$root"
    { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv; nproc; "$k2" --version; } 2>&1 | tee "$out/device.txt"
    status=0
    step() { echo "=== $1" | tee -a "$out/summary.txt"; }
    # The issue-10 target rows of a bench-spmv table (columns: contender 1-22, variant
    # 24-37, direction 39, B 41-44): B = 1 and 64 (the bit-packed batch and cuSPARSE SpMM
    # at 64), plus the header, skips and rejections.
    spmv_rows() {
        awk '/bits\/cell|^contender|^skipped|REJECTED|^error/ { print; next }
             { b = substr($0, 41, 4) + 0; d = substr($0, 39, 1) }
             (d == "R" || d == "L") && (b == 1 || b == 64) && !/^(cpu|bcsr)/' "$1"
    }
    # bench-spmv on the 200M-edge web graph with binary $1, its table into $2, more
    # arguments after (SPMVWEB_KERNELS: the leaf-kernel variants beside the default, e.g.
    # rows,wagg; SPMVWEB_BATCHES: the f32 batch widths, default 1,16).
    spmv_web() {
        local k="$1" table="$2"; shift 2
        "$k" bench-spmv --synthetic web --edges 200M --repeats 20 --batches "${SPMVWEB_BATCHES:-1,16}" --bit-batches 64 --skip-cpu \
            ${SPMVWEB_KERNELS:+--leaf-kernels "$SPMVWEB_KERNELS"} "$@" >"$table" 2>&1
    }
    # bench-spmv's arguments for the before/after parts on cnr-2000 (spmvab, spmvbase):
    # SPMV_ARGS, else the tuned kernels' B = 1 and bit-packed 64 rows.
    spmv_ab_args="${SPMV_ARGS:---leaf-kernels tuned --batches 1 --bit-batches 64 --repeats 50}"
    # cnr-2000 `<c> p+ ?y` (issue 6): the GPU engine as `--engine auto` runs it (host walk
    # first), the CPU engine and Oxigraph side by side; then every product on the device.
    cnr_store() {
        if [ ! -d "$tmp/cnr.store" ]; then
            zcat "$cnr" | scripts/tsv-to-nt.sh > "$tmp/cnr.nt"
            "$k2" load "$tmp/cnr.nt" --store "$tmp/cnr.store" --quiet 2>&1 | tail -1
        fi
        grep -E '^fwd' sparql/cnr-2000.rpq > "$tmp/fwd.rpq"
        grep -E '^bwd0' sparql/cnr-2000.rpq > "$tmp/bwd.rpq"
    }
    fwd_part() {
        cnr_store
        step "cnr-2000 <c> p+ ?y: gpu (auto: host walk first), cpu, oxigraph"
        timeout 150 "$k2" bench --store "$tmp/cnr.store" --queries "$tmp/fwd.rpq" --engines gpu,cpu,oxigraph --repeats 2 --warmup 0 \
            --timeout 20 --quiet --json "$out/fwd.json" --csv "$out/fwd.csv" > "$out/fwd.txt" 2>&1; tail -6 "$out/fwd.txt" | tee -a "$out/summary.txt"
        step "cnr-2000 <c> p+ ?y: gpu, every product on the device (--no-host-walk)"
        timeout 60 "$k2" bench --store "$tmp/cnr.store" --queries "$tmp/fwd.rpq" --engines gpu --no-host-walk --repeats 3 --warmup 1 \
            --timeout 20 --quiet --csv "$out/fwd-device.csv" > "$out/fwd-device.txt" 2>&1; tail -4 "$out/fwd-device.txt" | tee -a "$out/summary.txt"
        step "cnr-2000 ?x p* <c> (10 of the 50): gpu (auto), cpu, oxigraph"
        timeout 100 "$k2" bench --store "$tmp/cnr.store" --queries "$tmp/bwd.rpq" --engines gpu,cpu,oxigraph --repeats 2 --warmup 0 \
            --timeout 20 --quiet --csv "$out/bwd.csv" > "$out/bwd.txt" 2>&1; tail -6 "$out/bwd.txt" | tee -a "$out/summary.txt"
        "$k2" explain --store "$tmp/cnr.store" --engine gpu '<urn:k2rpq:n:223625> <urn:k2rpq:p>+ ?y' > "$out/explain-fwd.txt" 2>&1
        grep -E "^engine" "$out/explain-fwd.txt" | tee -a "$out/summary.txt"
    }
    for part in $parts; do case "$part" in
    fwd) fwd_part ;;
    layouts)
        # The same queries with every product on the device, per frontier layout: forward
        # paths take right products, backward ones left products.
        cnr_store
        for layout in rowblocks colblocks both; do
            for q in fwd bwd; do
                step "cnr-2000 $q, every product on the device, --frontier-layout $layout"
                timeout 100 "$k2" bench --store "$tmp/cnr.store" --queries "$tmp/$q.rpq" --engines gpu --no-host-walk \
                    --frontier-layout "$layout" --stats --repeats 3 --warmup 1 --timeout 20 --quiet \
                    --csv "$out/$q-$layout.csv" > "$out/$q-$layout.txt" 2>&1
                tail -8 "$out/$q-$layout.txt" | tee -a "$out/summary.txt"
            done
        done ;;
    lines)
        step "line lists at 100M (scripts/lines-100m.sh; logs in lines/)"
        bash scripts/lines-100m.sh "$bin" "$out/lines" 2>&1 | tee -a "$out/summary.txt" ;;
    tests)
        for t in "$bin"/*; do
            name="$(basename "$t")"; case "$name" in k2rpq|k2rpq-base|lines_build|profile_leaves|header_runs|descent_profile|row_groups) continue ;; esac
            # TESTS (e.g. "gpu_engine rpq_gpu"): only these binaries; TEST_ARGS: passed to each.
            if [ -n "${TESTS:-}" ] && ! [[ " $TESTS " == *" $name "* ]]; then continue; fi
            step "test $name"
            # shellcheck disable=SC2086
            if "$t" --test-threads=1 ${TEST_ARGS:-} >"$out/test-$name.log" 2>&1; then
                echo "ok: $(grep -E '^test result' "$out/test-$name.log" | tail -1)" | tee -a "$out/summary.txt"
            else
                echo "FAILED" | tee -a "$out/summary.txt"; tail -40 "$out/test-$name.log"; status=1
            fi
        done ;;
    groups)
        step "bit-packed right products over row groups (examples/row_groups.rs): cnr-2000"
        "$bin/row_groups" "$cnr" "${GROUPS_REPS_CNR:-300}" 2>&1 | tee -a "$out/summary.txt" || status=1
        if [ "${GROUPS_COPIES:-64}" != 0 ]; then
            step "bit-packed right products over row groups: cnr-2000 x ${GROUPS_COPIES:-64}"
            "$bin/row_groups" "$cnr*${GROUPS_COPIES:-64}" 30 2>&1 | tee -a "$out/summary.txt" || status=1
        fi
        if [ "${GROUPS_WEB:-1}" != 0 ]; then
            step "bit-packed right products over row groups: web 200M"
            "$bin/row_groups" 200000000 20 2>&1 | tee -a "$out/summary.txt" || status=1
        fi ;;
    spmv)
        step "bench-spmv cnr-2000 (full table: spmv-cnr.txt; here B = 1 and bit-packed 64 rows, every leaf kernel)"
        # SPMV_ARGS: more bench-spmv arguments (e.g. --leaf-kernels tuned --batches 1).
        # shellcheck disable=SC2086
        "$k2" bench-spmv --tsv "$cnr" ${SPMV_ARGS:-} --json "$out/spmv-cnr.json" --svg "$out/spmv-cnr.svg" >"$out/spmv-cnr.txt" 2>&1
        spmv_rows "$out/spmv-cnr.txt" ;;
    spmvweb)
        step "bench-spmv web 200M (full table: spmv-web.txt; here B = 1 and bit-packed 64 rows, every leaf kernel)"
        spmv_web "$k2" "$out/spmv-web.txt" --json "$out/spmv-web200m.json" --svg "$out/spmv-web200m.svg"
        spmv_rows "$out/spmv-web.txt" ;;
    spmvcopies)
        copies="${SPMVCOPIES:-64}"
        step "bench-spmv cnr-2000 x $copies (full table: spmv-cnr$copies.txt; here B = 1 and bit-packed 64 rows)"
        "$k2" bench-spmv --tsv "$cnr" --copies "$copies" --repeats 20 --batches "${SPMVWEB_BATCHES:-1,16}" --bit-batches 64 \
            --skip-cpu ${SPMVWEB_KERNELS:+--leaf-kernels "$SPMVWEB_KERNELS"} --json "$out/spmv-cnr$copies.json" \
            --svg "$out/spmv-cnr$copies.svg" >"$out/spmv-cnr$copies.txt" 2>&1 || status=1
        spmv_rows "$out/spmv-cnr$copies.txt" ;;
    descent)
        # DESCENT_FUSED: the levels per expand step to compare (GpuOptions::fused_levels).
        # DESCENT_KERNEL_DIRS: kernel folders (names under kernels/ or paths) timed in turn
        # in one process; DESCENT_CNR=1: cnr-2000 too (DESCENT_REPS_CNR products);
        # DESCENT_WEB=0: not the web graph; DESCENT_NCU=0: no ncu pass.
        fused="${DESCENT_FUSED:-1,3}"
        if [ -n "${DESCENT_KERNEL_DIRS:-}" ]; then
            DESCENT_KERNEL_DIRS="$(echo "$DESCENT_KERNEL_DIRS" | tr ',' '\n' | sed "s|^\([^/]\)|$carry/kernels/\1|" | paste -sd, -)"
            export DESCENT_KERNEL_DIRS
        fi
        if [ "${DESCENT_WEB:-1}" != 0 ]; then
            step "tree-only descents of web 200M per fused_levels ($fused): plans and device times (descent_profile)"
            "$bin/descent_profile" 200000000 "$fused" 20 2>&1 | tee -a "$out/summary.txt" || status=1
        fi
        if [ "${DESCENT_CNR:-0}" != 0 ]; then
            step "tree-only descents of cnr-2000 per fused_levels ($fused) (descent_profile)"
            "$bin/descent_profile" "$cnr" "$fused" "${DESCENT_REPS_CNR:-300}" 2>&1 | tee -a "$out/summary.txt" || status=1
        fi
        if [ -n "${DESCENT_COPIES:-}" ]; then
            step "tree-only descents of cnr-2000 x $DESCENT_COPIES per fused_levels ($fused) (descent_profile)"
            "$bin/descent_profile" "$cnr*$DESCENT_COPIES" "$fused" 20 2>&1 | tee -a "$out/summary.txt" || status=1
        fi
        if [ "${DESCENT_NCU:-1}" != 0 ] && command -v ncu >/dev/null; then
            sources=""
            [ "${DESCENT_WEB:-1}" != 0 ] && sources="200000000"
            [ -n "${DESCENT_COPIES:-}" ] && sources="$sources $cnr*$DESCENT_COPIES"
            for src in $sources; do
                step "ncu ($(basename "$src")): each launch of one right and one left product per fused_levels, summed per kernel"
                timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
                    "$bin/descent_profile" "$src" "${DESCENT_NCU_FUSED:-$fused}" 0 > "$tmp/ncu-descent.csv" 2>/dev/null || status=1
                python3 "$root/scripts/ncu-sum.py" "$tmp/ncu-descent.csv" 2>&1 | tee -a "$out/summary.txt" || status=1
            done
        fi ;;
    headers)
        step "bit-packed right products over header-run windows (examples/header_runs.rs), cnr-2000 and web 200M"
        "$bin/header_runs" "$cnr" "${HEADERS_REPS_CNR:-300}" 2>&1 | tee -a "$out/summary.txt" || status=1
        "$bin/header_runs" 200000000 "${HEADERS_REPS:-30}" 2>&1 | tee -a "$out/summary.txt" || status=1 ;;
    leaves)
        # LEAVES_KERNELS / LEAVES_LAYOUTS: which leaf kernels and frontier layouts.
        # LEAVES_OP: f32 (default) or bits.
        kernels="${LEAVES_KERNELS:-rows,wagg,runs}" layouts="${LEAVES_LAYOUTS:-codes,blocks,rowblocks}"
        op="${LEAVES_OP:-f32}"
        step "leaf kernels alone, web 200M, $op (profile_leaves: $kernels over $layouts)"
        "$bin/profile_leaves" 200000000 "$kernels" 20 "$layouts" "$op" 2>&1 | tee -a "$out/summary.txt" || status=1
        if command -v ncu >/dev/null; then
            step "ncu: the block-entry leaf kernels (ncu-leaves.txt)"
            timeout 240 ncu --kernel-name regex:'blocks_' --launch-count 12 --section SpeedOfLight \
                --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
                --section InstructionStats \
                "$bin/profile_leaves" 200000000 "$kernels" 1 blocks,rowblocks "$op" > "$out/ncu-leaves.txt" 2>&1 || status=1
            grep -E "blocks_|Duration|Memory Throughput|DRAM Throughput|L2 Hit|L1/TEX Hit|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Compute \(SM\) Throughput" \
                "$out/ncu-leaves.txt" | tee -a "$out/summary.txt"
        else
            echo "ncu: not installed" | tee -a "$out/summary.txt"
        fi ;;
    codex)
        step "main job: CoDEx-M"
        rm -rf "$tmp/codex-m.store"
        "$k2" load fixtures/codex/codex-m.nt.gz --store "$tmp/codex-m.store" --quiet 2>&1 | tail -2
        "$k2" bench --store "$tmp/codex-m.store" --queries sparql/codex-m.rpq --quiet --stats \
            --json "$out/bench-codex-m.json" --svg "$out/bench-codex-m.svg" 2>&1 | tee "$out/bench-codex-m.txt" | tail -25 ;;
    cnr)
        step "RPQ cnr-2000"
        zcat "$cnr" | scripts/tsv-to-nt.sh > "$tmp/cnr.nt"
        rm -rf "$tmp/cnr.store"; "$k2" load "$tmp/cnr.nt" --store "$tmp/cnr.store" --quiet 2>&1 | tail -2
        timeout 300 "$k2" bench --store "$tmp/cnr.store" --queries sparql/cnr-2000.rpq --quiet --stats --repeats 3 --warmup 0 --timeout 20 \
            --json "$out/bench-cnr.json" --svg "$out/bench-cnr.svg" 2>&1 | tee "$out/bench-cnr.txt" | tail -12
        step "all pairs ?x p+ ?y on cnr-2000: k2rpq GPU (count) vs Oxigraph (60 s timeout)"
        ( time timeout 200 "$k2" rpq --store "$tmp/cnr.store" --engine gpu --count --timeout 180 '?x <urn:k2rpq:p>+ ?y' ) 2>&1 | tee "$out/allpairs-gpu.txt" | tail -6
        [ -n "${SKIP_OXIGRAPH_ALL_PAIRS:-}" ] || "$k2" bench --store "$tmp/cnr.store" --queries sparql/cnr-2000-all-pairs.rpq --engines oxigraph --repeats 1 --warmup 0 --timeout 60 --quiet 2>&1 | tee "$out/allpairs-oxigraph.txt" | tail -6 ;;
    latency)
        step "query latency: cnr-2000 constants (gpu vs oxigraph), CoDEx-M (cpu vs oxigraph)"
        if [ ! -d "$tmp/cnr.store" ]; then
            zcat "$cnr" | scripts/tsv-to-nt.sh > "$tmp/cnr.nt"
            "$k2" load "$tmp/cnr.nt" --store "$tmp/cnr.store" --quiet 2>&1 | tail -2
        fi
        rm -rf "$tmp/codex-m.store"; "$k2" load fixtures/codex/codex-m.nt.gz --store "$tmp/codex-m.store" --quiet 2>&1 | tail -1
        # The 50 `<c> p+ ?y` and 10 of the `?x p* <c>` (Oxigraph takes ~0.6 s on each of those).
        grep -E '^(fwd|bwd0)' sparql/cnr-2000.rpq > "$tmp/cnr-latency.rpq"
        for b in "$bin/k2rpq-base" "$k2"; do
            [ -x "$b" ] || continue
            tag="$(basename "$b")"
            echo "--- $tag: cnr-2000, gpu vs oxigraph" | tee -a "$out/summary.txt"
            timeout 240 "$b" bench --store "$tmp/cnr.store" --queries "$tmp/cnr-latency.rpq" --engines gpu,oxigraph --repeats 3 --warmup 1 --timeout 20 \
                --quiet --csv "$out/latency-cnr-$tag.csv" 2>&1 | tee "$out/latency-cnr-$tag.txt" | tail -5
            "$b" explain --store "$tmp/cnr.store" --engine gpu '<urn:k2rpq:n:153487> <urn:k2rpq:p>+ ?y' > "$out/explain-cnr-fwd-$tag.txt" 2>&1
            "$b" explain --store "$tmp/cnr.store" --engine gpu '?x <urn:k2rpq:p>* <urn:k2rpq:n:153487>' > "$out/explain-cnr-bwd-$tag.txt" 2>&1
            grep -E "^engine" "$out/explain-cnr-fwd-$tag.txt" "$out/explain-cnr-bwd-$tag.txt"
            echo "--- $tag: CoDEx-M, cpu vs oxigraph" | tee -a "$out/summary.txt"
            timeout 120 "$b" bench --store "$tmp/codex-m.store" --queries sparql/codex-m.rpq --engines cpu,oxigraph --repeats 11 --quiet \
                --csv "$out/latency-codex-$tag.csv" 2>&1 | tee "$out/latency-codex-$tag.txt" | tail -5
        done ;;
    wd)
        # Issue 9's large target: >= 100M triples, gpu,cpu,oxigraph in one run, within ~8 min
        # (gen ~7 s, load ~40 s, then the bench; Oxigraph's single-threaded in-memory copy is
        # overlapped with the k2rpq engines' queries). The workload is written by the same
        # binary for the same size (for 100M it equals sparql/wikidata-like-100m.rpq).
        # WD_TIMEOUT: per-run query timeout (s); WD_REPEATS: timed repeats after the cold run;
        # WD_ENGINES: the bench's engines (default gpu,cpu,oxigraph); WD_LOADS: see below.
        # WD_BENCH_LIMIT (default 530 s): the bench needs ~480-500 s at 100M with 3 repeats
        # (Oxigraph's load ~300 s); at 470 and 500 s it was cut while writing its summary.
        n="${WD_TRIPLES:-100000000}"
        step "wikidata-like $n triples: gen, load, bench gpu,cpu,oxigraph (workload: wd-queries.rpq)"
        rm -rf "$tmp/wd.store" "$tmp/wd.nt"
        ( time "$k2" gen wikidata-like --triples "$n" -o "$tmp/wd.nt" --workload "$out/wd-queries.rpq" ) 2>&1 | tail -5 | tee -a "$out/summary.txt"
        ( time "$k2" load "$tmp/wd.nt" --store "$tmp/wd.store" --quiet ) 2>&1 | tail -6 | tee -a "$out/summary.txt"
        # WD_LOADS: load the dump this many times in all (issue 5's throughput; the later
        # loads go to a scratch store that is removed).
        for _ in $(seq 2 "${WD_LOADS:-1}"); do
            rm -rf "$tmp/wd-again.store"
            ( time "$k2" load "$tmp/wd.nt" --store "$tmp/wd-again.store" --quiet ) 2>&1 | tail -6 | tee -a "$out/summary.txt"
        done
        rm -rf "$tmp/wd-again.store" "$tmp/wd.nt"
        # The line lists kept on disk (timed apart from the load; WD_LINES=0 skips them).
        if [ "${WD_LINES:-1}" != 0 ]; then
            ( time "$k2" lines --store "$tmp/wd.store" --quiet ) 2>&1 | tail -5 | tee -a "$out/summary.txt"
        fi
        timeout "${WD_BENCH_LIMIT:-530}" "$k2" bench --store "$tmp/wd.store" --queries "$out/wd-queries.rpq" \
            --engines "${WD_ENGINES:-gpu,cpu,oxigraph}" --overlap-load --quiet --stats --warmup 0 \
            --repeats "${WD_REPEATS:-1}" --timeout "${WD_TIMEOUT:-10}" \
            --json "$out/bench-wd.json" --csv "$out/bench-wd.csv" --svg "$out/bench-wd.svg" > "$out/bench-wd.txt" 2>&1
        rc=$?; [ $rc -eq 0 ] || { echo "bench exit $rc (124: the ${WD_BENCH_LIMIT:-530} s limit)" | tee -a "$out/summary.txt"; status=1; }
        sed -n '/^Summary/,$p' "$out/bench-wd.txt" | tee -a "$out/summary.txt"
        grep -E '^(query|w[0-9])' "$out/bench-wd.txt" | head -60 ;;
    wdtrace)
        # Where a GPU query's time goes on a 100M wikidata-like store (21.7M nodes): explain
        # traces (relation loads, per-step ms, total) of small constant queries on the GPU
        # and the CPU, with the wall time of each command. The load doubles as issue 5's.
        n="${WD_TRIPLES:-100000000}"
        step "wdtrace: wikidata-like $n: load, then explain traces"
        rm -rf "$tmp/wd.store" "$tmp/wd.nt"
        "$k2" gen wikidata-like --triples "$n" -o "$tmp/wd.nt" --workload "$tmp/wd.rpq" 2>&1 | tail -1
        TIMEFORMAT='load wall %R s, user %U s, sys %S s'
        { time "$k2" load "$tmp/wd.nt" --store "$tmp/wd.store" --quiet ; } 2>&1 | tail -5 | tee -a "$out/summary.txt"
        rm -f "$tmp/wd.nt"
        TIMEFORMAT='wall %R s'
        for q in w06 w24 w13 w10; do
            text="$(grep -E "^$q," "$tmp/wd.rpq" | cut -d, -f2-)"
            for e in gpu cpu; do
                echo "--- $q $e: $text" | tee -a "$out/summary.txt"
                { time "$k2" explain --store "$tmp/wd.store" --engine "$e" "$text" > "$out/explain-wd-$q-$e.txt" 2>&1 ; } 2>&1 | tee -a "$out/summary.txt"
                grep -E "^(engine|result)" "$out/explain-wd-$q-$e.txt" | tee -a "$out/summary.txt"
            done
        done
        rm -rf "$tmp/wd.store" ;;
    build)
        step "bench-build"
        "$k2" bench-build --input "$cnr" --synthetic web --edges 1G --frontier 2>&1 | tee "$out/bench-build.txt" | tail -8 ;;
    cache)
        step "bench-cache gpu"
        timeout 150 "$k2" bench-cache --engine gpu --synthetic-relations 50 --edges 16M --ops 2000 --stats 2>&1 | tee "$out/bench-cache.txt" | tail -10 ;;
    multi)
        step "multi-GPU tests"
        if "$bin/gpu_multi" --test-threads=1 >"$out/test-gpu_multi.log" 2>&1; then
            echo "ok: $(grep -E '^test result' "$out/test-gpu_multi.log" | tail -1)" | tee -a "$out/summary.txt"
        else
            echo "FAILED" | tee -a "$out/summary.txt"; tail -40 "$out/test-gpu_multi.log"; status=1
        fi
        if [ ! -d "$tmp/cnr.store" ]; then
            zcat "$cnr" | scripts/tsv-to-nt.sh > "$tmp/cnr.nt"
            "$k2" load "$tmp/cnr.nt" --store "$tmp/cnr.store" --quiet 2>&1 | tail -2
        fi
        # Long var→var workloads: no untimed pass (loading 3.2M edges is noise beside
        # seconds of batches); the 100 short constant queries get one.
        for wl in cnr-2000-all-pairs:0 cnr-2000-var-var:0 cnr-2000:1; do
            w="${wl%:*}"; step "bench --scaling $w (--gpus all)"
            "$k2" bench --store "$tmp/cnr.store" --queries "sparql/$w.rpq" --gpus all --scaling --count \
                --warmup "${wl#*:}" --repeats 1 --timeout 60 --quiet --json "$out/scaling-$w.json" 2>&1 | tee "$out/scaling-$w.txt" | tail -8 || status=1
        done
        step "bench-spmv --gpus all: row stripes of a 200M-edge web graph"
        "$k2" bench-spmv --synthetic web --edges 200M --gpus all --bit-batches 64 --repeats 10 \
            --json "$out/spmv-multi.json" 2>&1 | tee "$out/spmv-multi.txt" | tail -12 || status=1 ;;
    rowwin)
        # The engine's bit-packed right kernel from each folder of $carry/kernels against
        # the others over the same row windows (examples/header_runs.rs), y checked word for
        # word; then ncu's kernel durations on cnr-2000 (the loop's host floor is ~7 µs there).
        # ROWWIN_KERNELS: the experiment's kernels beside them (default rowwin_u32_half).
        kd="$carry/kernels"; dirs="${ROWWIN_DIRS:-base=$kd/base,tree=$kd/tree}"
        kernels="${ROWWIN_KERNELS:-rowwin_u32_half}"
        step "engine rowwindows_bits from $dirs and $kernels over the same row windows (header_runs): cnr-2000, web 200M"
        HEADER_RUNS_KERNELS="$kernels" HEADER_RUNS_ENGINE_DIRS="$dirs" "$bin/header_runs" "$cnr" "${HEADERS_REPS_CNR:-300}" 2>&1 | tee -a "$out/summary.txt" || status=1
        if command -v ncu >/dev/null; then
            # Warm, clocks as found: kernel durations in launch order (each kernel: a checked
            # launch, a warm-up and 5 timed), experiment kernels first, then engine:<dir>s.
            step "ncu kernel durations, warm (ncu-rowwin-variants.txt)"
            timeout 200 ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum \
                --kernel-name regex:'rowwin|rowwindows|floor_' \
                env HEADER_RUNS_KERNELS="$kernels" HEADER_RUNS_ENGINE_DIRS="$dirs" "$bin/header_runs" "$cnr" 5 > "$out/ncu-rowwin-variants.txt" 2>&1 || status=1
            awk '/^  [a-z_0-9]+ \(/ { k = $1 } /gpu__time_duration.sum/ { print k, $(NF-1), $NF }' "$out/ncu-rowwin-variants.txt" | tee -a "$out/summary.txt"
        fi
        [ "${ROWWIN_WEB:-1}" != 0 ] && { HEADER_RUNS_KERNELS="$kernels" HEADER_RUNS_ENGINE_DIRS="$dirs" "$bin/header_runs" 200000000 "${HEADERS_REPS:-30}" 2>&1 | tee -a "$out/summary.txt" || status=1; } ;;
    spmvab)
        # bench-spmv on cnr-2000 with the kernels of several folders and timing holds:
        # SPMVAB="tree:200 base:200 tree:0" (folder of $carry/kernels : --hold-us).
        for spec in ${SPMVAB:-tree:200 tree:0}; do
            tag="${spec%%:*}"; hold="${spec#*:}"
            step "bench-spmv cnr-2000, kernels $tag, --hold-us $hold (spmv-cnr-$tag-$hold.txt)"
            # shellcheck disable=SC2086
            K2RPQ_KERNEL_DIR="$carry/kernels/$tag" "$k2" bench-spmv --tsv "$cnr" --hold-us "$hold" $spmv_ab_args \
                >"$out/spmv-cnr-$tag-$hold.txt" 2>&1 || status=1
            spmv_rows "$out/spmv-cnr-$tag-$hold.txt" | tee -a "$out/summary.txt"
        done ;;
    spmvbase)
        # bench-spmv with bin/k2rpq-base (K2RPQ_BASE at --build) and bin/k2rpq in turn,
        # SPMVBASE_ROUNDS times (default 2): before/after of a host and kernel change in
        # one call. cnr-2000 (SPMV_ARGS as `spmv`), then the web graph as `spmvweb` once
        # each (SPMVBASE_WEB=0: not).
        [ -x "$bin/k2rpq-base" ] || { echo "spmvbase: no bin/k2rpq-base (K2RPQ_BASE at --build)" | tee -a "$out/summary.txt"; status=1; }
        for round in $(seq "${SPMVBASE_ROUNDS:-2}"); do
            for b in k2rpq-base k2rpq; do
                [ -x "$bin/$b" ] || continue
                step "bench-spmv cnr-2000 with $b, round $round (spmv-cnr-$b-$round.txt)"
                # shellcheck disable=SC2086
                "$bin/$b" bench-spmv --tsv "$cnr" $spmv_ab_args >"$out/spmv-cnr-$b-$round.txt" 2>&1 || status=1
                spmv_rows "$out/spmv-cnr-$b-$round.txt" | tee -a "$out/summary.txt"
            done
        done
        if [ "${SPMVBASE_WEB:-1}" != 0 ]; then
            for b in k2rpq-base k2rpq; do
                [ -x "$bin/$b" ] || continue
                step "bench-spmv web 200M with $b (spmv-web-$b.txt)"
                spmv_web "$bin/$b" "$out/spmv-web-$b.txt" || status=1
                spmv_rows "$out/spmv-web-$b.txt" | tee -a "$out/summary.txt"
            done
        fi ;;
    profile)
        if command -v ncu >/dev/null; then
            # PROFILE_KERNEL: the kernel profiled (default rowwindows_bits; rowgroups_bits is
            # the `rowgrp` contender's).
            kernel="${PROFILE_KERNEL:-rowwindows_bits}"
            step "ncu: $kernel on cnr-2000, warm (ncu-$kernel.txt)"
            timeout 240 ncu --cache-control none --clock-control none --kernel-name "$kernel" --launch-skip 4 \
                --launch-count 1 --set full "$k2" bench-spmv --tsv "$cnr" --leaf-kernels tuned --batches 1 \
                --bit-batches 64 --repeats 3 --warmup 1 --skip-cpu > "$out/ncu-$kernel.txt" 2>&1 || status=1
            grep -E "Duration|Throughput|Hit Rate|Busy|Bandwidth|Achieved Occupancy|Theoretical Occupancy|Registers Per|Warp Cycles Per|Waves Per SM|Stall|Executed Ipc|Block Limit" \
                "$out/ncu-$kernel.txt" | head -70 | tee -a "$out/summary.txt"
        else
            echo "ncu: not installed" | tee -a "$out/summary.txt"
        fi ;;
    quick)
        for x in rpq_gpu sparql_gpu gpu_multi; do
            step "test $x"
            if timeout 60 "$bin/$x" --test-threads=1 >"$out/test-$x.log" 2>&1; then
                grep -E '^test result' "$out/test-$x.log" | tee -a "$out/summary.txt"
            else
                echo FAILED | tee -a "$out/summary.txt"; grep -E "panicked|failed" "$out/test-$x.log" | head -5; status=1
            fi
        done
        fwd_part
        rm -rf "$tmp/cm.store"; "$k2" load fixtures/codex/codex-m.nt.gz --store "$tmp/cm.store" --quiet > /dev/null 2>&1
        grep -E '^(q14|q27|q37|q16|q03),' sparql/codex-m.rpq > "$tmp/neg.rpq"
        step "CoDEx-M q03 q14 q16 q27 q37: cpu vs oxigraph"
        timeout 40 "$k2" bench --store "$tmp/cm.store" --queries "$tmp/neg.rpq" --engines cpu,oxigraph --repeats 21 --quiet 2>&1 | grep -E "^q" | tee -a "$out/summary.txt"
        step "test gpu_engine"
        timeout 100 "$bin/gpu_engine" --test-threads=1 > "$out/test-gpu_engine.log" 2>&1 || status=1
        tail -3 "$out/test-gpu_engine.log" | tee -a "$out/summary.txt" ;;
    load)
        # Load throughput (issue 5). Uncompressed .nt for the 100M figure: one gzip stream
        # inflates on one thread (~1 GB/s of text, i.e. a ~9 M lines/s ceiling), see
        # docs/BENCHMARKS.md "Load, session 2". Disk: the 100M .nt is ~12 GiB, removed after.
        df -h "$tmp" | tail -1
        tv=""; [ -x /usr/bin/time ] && tv="/usr/bin/time -v"
        for spec in ${LOAD_SIZES:-20000000:nt.gz 20000000:nt 100000000:nt}; do
            n="${spec%%:*}"; ext="${spec#*:}"; f="$tmp/wl-$n.$ext"; log="$out/load-$n-$ext"
            step "load: wikidata-like $n triples, .$ext"
            rm -f "$tmp"/wl-*; rm -rf "$tmp/wl.store"
            ( time "$k2" gen wikidata-like --triples "$n" -o "$f" ) 2>&1 | tail -4
            ls -la "$f"
            start=$(date +%s.%N)
            TIMEFORMAT='bash-time real %R user %U sys %S'
            { time $tv "$k2" load "$f" --store "$tmp/wl.store" --quiet ; } >"$log.txt" 2>&1
            end=$(date +%s.%N)
            cat "$log.txt" | grep -vE '^\s+(Page size|Exit status|Swaps|File system|Socket|Signals|Average)' | tail -30
            # The load's own lines (phases and their stages) also go to the summary.
            grep -E '^(loaded |  parse: )' "$log.txt" | tee -a "$out/summary.txt"
            awk -v n="$n" -v s="$start" -v e="$end" -v nproc="$(nproc)" '
                /bash-time/ { u=$5; y=$7 }
                /Maximum resident set size/ { rss=$6 }
                END { w=e-s; printf "RESULT load n=%d wall=%.2fs cpu=%.2fs  %.2f M statements/s end to end, %.2f M per CPU-second, %.2f cores busy, peak RSS %.0f MiB (%.1f B/statement)\n",
                      n, w, u+y, n/w/1e6, n/(u+y)/1e6, (u+y)/w, rss/1024, rss*1024/n }' "$log.txt" | tee -a "$out/summary.txt"
            du -sh "$tmp/wl.store"
        done
        rm -f "$tmp"/wl-*; rm -rf "$tmp/wl.store" ;;
    *) echo "unknown part $part" ;;
    esac; done
    exit $status
    ;;
*)
    echo "usage: $0 --build | --device [tests spmv spmvweb descent leaves codex cnr fwd wd wdtrace build cache multi load latency quick]" >&2; exit 2 ;;
esac
