#!/usr/bin/env bash
# The GPU test suite and benchmarks, for a machine with an NVIDIA GPU but no Rust toolchain.
#
#   scripts/gpu-suite.sh build              # here: release binaries, the GPU test binaries
#                                           # and cnr-2000 into .carry/gpu (xz-compressed)
#   bash .carry/gpu/gpu-suite.sh run [PARTS] # there, from the repository's root; logs in $OUT
#
# PARTS (default: tests spmv rpq):
#   tests  every GPU test binary of the workspace, one test at a time
#   spmv   k2rpq-bench spmv on cnr-2000 (SPMV_WEB=1: also the 200M-edge synthetic web graph)
#   rpq    the main job (CoDEx-M path workload: gpu, cpu, oxigraph), the cnr-2000 workload,
#          and all pairs of `?x p+ ?y` on cnr-2000 counted on the GPU
#   load   gen wikidata-like LOAD_TRIPLES (default 20M) as one gzip stream and as LOAD_SHARDS
#          (default 16) gzip shards, and load each, timed
#   multi  several GPUs: the multi-GPU tests and the workload at 1..N GPUs
#   scale  gen wikidata-like SCALE_TRIPLES (default 1000000000) as SCALE_SHARDS (64) gzip
#          shards, then `k2rpq load` of their folder (SCALE_PIPE=1: gen piped into load;
#          /usr/bin/time -v: peak RSS), then its workload class by class (cv vc cc vv
#          heavy) on SCALE_ENGINES (default gpu,cpu), --repeats 3 --warmup 0 --timeout 60,
#          with --gpu-budget SCALE_GPU_BUDGET (default: half the store's trees, so the
#          device cache must evict). Appends to scale.log and scale-workload.json (one JSON
#          document per class) as each step ends, so a call cut at its limit keeps them;
#          a class still running SCALE_SECONDS (default 570) after the part began is
#          stopped (its finished queries stay in scale.log) and later ones are skipped.
#          SCALE_CLASSES picks classes (default "cv vc cc vv heavy"), SCALE_REPEATS the
#          repeats (3); the store stays in the machine's temporary folder, and a later
#          call with SCALE_REUSE=1 queries it again without generating and loading.
#   sparql the CoDEx-M mixed SPARQL workload (gpu, cpu, oxigraph; SPARQL_REPEATS, default 5), the cnr-2000 SPARQL
#          counts (gpu, cpu), `p/p/p` counted by `rpq --count` and by SPARQL (PPP_REPEATS
#          times, default 1)
#   startup the start-up of `query` on each engine: a constant start that host walks
#          answer, then a closure that needs the device (its first run with a cold kernel
#          cache; K2RPQ_LOG=debug gives the device set-up's own timings)
#   stream a streaming SELECT of STREAM_ROWS (default 100000000) rows of `?x p+ ?y` on
#          cnr-2000 on STREAM_ENGINES (default gpu), TSV to /dev/null: time and peak RSS
#   embedding `k2rpq-bench embedding --quads 200000` three times (a host-only benchmark,
#          run here for a quiet machine)
#   endpoint  `k2rpq-bench endpoint` (64 clients, ENDPOINT_SECONDS, default 30) against
#          `k2rpq serve` and `oxigraph serve-read-only` on CoDEx-M's path workload
#
# The shared datasets come from $K2RPQ_SHARED (the folder holding data/) at build time.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case "${1:-}" in
build)
    set -e
    root="$(cd "$here/.." && pwd)"
    carry="$root/.carry/gpu"
    cd "$root"
    rm -rf "$carry"; mkdir -p "$carry/bin" "$carry/data/cnr-2000"
    cargo build --release -p k2rpq-cli -p k2rpq-bench
    target="${CARGO_TARGET_DIR:-target}"
    cp "$target/release/k2rpq" "$target/release/k2rpq-bench" "$carry/bin/"
    # The GPU test binaries: tests named gpu_* or *_gpu in any crate of the workspace.
    tests=$(ls tests/*.rs bench/tests/*.rs | xargs -n1 basename | sed 's/\.rs$//' | grep -E '^gpu_|_gpu$' | sed 's/^/--test /' | tr '\n' ' ')
    # shellcheck disable=SC2086
    cargo test --release --workspace $tests --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])
' | while read -r exe; do cp "$exe" "$carry/bin/$(basename "$exe" | sed 's/-[0-9a-f]*$//')"; done
    shared="${K2RPQ_SHARED:-$root/../shared}"
    cp "$shared/data/cnr-2000/cnr-2000.arcs.tsv.gz" "$carry/data/cnr-2000/"
    # The peer server of the endpoint part: oxigraph-cli's binary (`cargo install
    # oxigraph-cli`), from $OXIGRAPH or the PATH.
    ox="${OXIGRAPH:-$(command -v oxigraph || true)}"
    [ -n "$ox" ] && cp "$ox" "$carry/bin/oxigraph"
    xz -T0 -6 "$carry"/bin/*
    cp "$here/gpu-suite.sh" "$carry/gpu-suite.sh"
    du -sh "$carry"
    ;;
run)
    shift
    carry="$here"
    parts="${*:-tests spmv rpq}"
    out="${OUT:-$carry/out}"; mkdir -p "$out"
    tmp="${TMPDIR:-/tmp}/k2rpq-gpu"; mkdir -p "$tmp"
    for f in "$carry"/bin/*.xz; do [ -e "$f" ] && xz -d -f "$f"; done
    chmod +x "$carry"/bin/*
    bin="$carry/bin"; k2="$bin/k2rpq"; kb="$bin/k2rpq-bench"; cnr="$carry/data/cnr-2000/cnr-2000.arcs.tsv.gz"
    export K2RPQ_SHARED="$carry" NCCL_NVLS_ENABLE=0
    export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; "$k2" --version; } 2>&1 | tee "$out/machine.txt"
    status=0
    step() { echo "=== $(date +%T) $1" | tee -a "$out/summary.txt"; }
    codex_store() {
        [ -d "$tmp/codex-m.store" ] && return
        "$k2" load fixtures/codex/codex-m.nt.gz --store "$tmp/codex-m.store" --quiet 2>&1 | tail -1
    }
    cnr_store() {
        [ -d "$tmp/cnr.store" ] && return
        zcat "$cnr" | scripts/tsv-to-nt.sh > "$tmp/cnr.nt"
        "$k2" load "$tmp/cnr.nt" --store "$tmp/cnr.store" --quiet 2>&1 | tail -1
    }
    for part in $parts; do case "$part" in
    tests)
        for t in "$bin"/*; do
            name="$(basename "$t")"
            case "$name" in gpu_*|*_gpu) ;; *) continue ;; esac
            step "test $name"
            if "$t" --test-threads=1 >"$out/test-$name.log" 2>&1; then
                echo "ok: $(grep -E '^test result' "$out/test-$name.log" | tail -1)" | tee -a "$out/summary.txt"
            else
                echo "FAILED" | tee -a "$out/summary.txt"; tail -40 "$out/test-$name.log"; status=1
            fi
        done ;;
    spmv)
        step "k2rpq-bench spmv cnr-2000 (spmv-cnr.txt, spmv-cnr.json)"
        "$kb" spmv --tsv "$cnr" --repeats 50 --json "$out/spmv-cnr.json" >"$out/spmv-cnr.txt" 2>&1 || status=1
        grep -E "^(contender|gpu|cusparse)" "$out/spmv-cnr.txt" | head -40
        if [ "${SPMV_WEB:-0}" != 0 ]; then
            step "k2rpq-bench spmv web 200M (spmv-web.txt, spmv-web.json)"
            "$kb" spmv --synthetic web --edges 200M --repeats 20 --batches 1 --bit-batches 64 --skip-cpu \
                --json "$out/spmv-web.json" >"$out/spmv-web.txt" 2>&1 || status=1
            grep -E "^(contender|gpu|cusparse)" "$out/spmv-web.txt" | head -40
        fi ;;
    rpq)
        step "main job: CoDEx-M path workload (gpu, cpu, oxigraph)"
        rm -rf "$tmp/codex-m.store"
        "$k2" load fixtures/codex/codex-m.nt.gz --store "$tmp/codex-m.store" --quiet 2>&1 | tail -1
        "$kb" workload --store "$tmp/codex-m.store" --queries sparql/codex-m.rpq --quiet --stats \
            --json "$out/workload-codex-m.json" >"$out/workload-codex-m.txt" 2>&1 || status=1
        sed -n '/^Summary/,$p' "$out/workload-codex-m.txt" | head -12
        step "cnr-2000 path workload (gpu, cpu, oxigraph)"
        cnr_store
        timeout 300 "$kb" workload --store "$tmp/cnr.store" --queries sparql/cnr-2000.rpq --quiet --stats --repeats 3 \
            --warmup 0 --timeout 20 --json "$out/workload-cnr.json" >"$out/workload-cnr.txt" 2>&1 || status=1
        sed -n '/^Summary/,$p' "$out/workload-cnr.txt" | head -12
        step "all pairs ?x p+ ?y on cnr-2000, counted on the GPU"
        ( time timeout 200 "$k2" rpq --store "$tmp/cnr.store" --engine gpu --count --timeout 180 '?x <urn:k2rpq:p>+ ?y' ) \
            >"$out/all-pairs.txt" 2>&1 || status=1
        tail -5 "$out/all-pairs.txt" ;;
    load)
        n="${LOAD_TRIPLES:-20000000}"; shards="${LOAD_SHARDS:-16}"
        step "wikidata-like $n triples: gen (one gzip stream, and $shards gzip shards), then load each, timed"
        rm -rf "$tmp/wd.store" "$tmp/wd-shards"
        /usr/bin/time -f '%e s wall, %M KB peak' "$kb" gen wikidata-like --triples "$n" -o "$tmp/wd.nt.gz" 2>&1 | tail -2
        /usr/bin/time -f '%e s wall, %M KB peak' "$k2" load "$tmp/wd.nt.gz" --store "$tmp/wd.store" --quiet 2>&1 \
            | tee "$out/load.txt" | tail -4
        rm -rf "$tmp/wd.store" "$tmp/wd.nt.gz"
        /usr/bin/time -f '%e s wall, %M KB peak' "$kb" gen wikidata-like --triples "$n" -o "$tmp/wd-shards" --shards "$shards" 2>&1 | tail -2
        /usr/bin/time -f '%e s wall, %M KB peak' "$k2" load "$tmp/wd-shards" --store "$tmp/wd.store" --quiet 2>&1 \
            | tee "$out/load-shards.txt" | tail -4
        rm -rf "$tmp/wd.store" "$tmp/wd-shards" ;;
    multi)
        step "multi-GPU tests"
        if "$bin/gpu_multi" --test-threads=1 >"$out/test-gpu_multi.log" 2>&1; then
            echo "ok: $(grep -E '^test result' "$out/test-gpu_multi.log" | tail -1)" | tee -a "$out/summary.txt"
        else
            echo "FAILED" | tee -a "$out/summary.txt"; tail -40 "$out/test-gpu_multi.log"; status=1
        fi
        cnr_store
        step "cnr-2000 all pairs at 1..N GPUs"
        "$kb" workload --store "$tmp/cnr.store" --queries sparql/cnr-2000-all-pairs.rpq --gpus all --scaling --count \
            --warmup 0 --repeats 1 --timeout 60 --quiet --json "$out/scaling.json" 2>&1 | tail -8 || status=1 ;;
    scale)
        n="${SCALE_TRIPLES:-1000000000}"
        deadline=$(( SECONDS + ${SCALE_SECONDS:-570} ))
        engines="${SCALE_ENGINES:-gpu,cpu}"
        store="$tmp/scale.store"; log="$out/scale.log"; wl="$out/scale-workload.rpq"
        : >"$out/scale-workload.json"
        if [ "${SCALE_REUSE:-0}" = 1 ] && [ -s "$tmp/scale-workload.rpq" ] && [ -d "$store" ]; then
            step "scale: reusing $store"; cp "$tmp/scale-workload.rpq" "$wl"
        else
        rm -rf "$store"
        "$kb" gen wikidata-like --triples "$n" --workload "$wl" >>"$log" 2>&1
        if [ "${SCALE_PIPE:-0}" = 1 ]; then
            step "scale: gen wikidata-like $n triples | load (scale.log)"
            # One pipe: ~120 GB of text at 10^9 triples, bound by the one stream.
            { /usr/bin/time -v -o "$tmp/gen-time.txt" "$kb" gen wikidata-like --triples "$n" -o - \
                2>>"$log" \
                | /usr/bin/time -v -o "$tmp/load-time.txt" "$k2" load - --format nt --store "$store" --quiet; } \
                >>"$log" 2>&1 || status=1
        else
            shards="${SCALE_SHARDS:-64}"
            step "scale: gen wikidata-like $n triples as $shards gzip shards (scale.log)"
            rm -rf "$tmp/scale-shards"
            /usr/bin/time -v -o "$tmp/gen-time.txt" "$kb" gen wikidata-like --triples "$n" \
                -o "$tmp/scale-shards" --shards "$shards" >>"$log" 2>&1 || status=1
            du -sb "$tmp/scale-shards" | awk '{printf "shards %.2f GiB\n", $1/2^30}' | tee -a "$log" "$out/summary.txt"
            step "scale: load the shards (scale.log)"
            /usr/bin/time -v -o "$tmp/load-time.txt" "$k2" load "$tmp/scale-shards" --store "$store" --quiet \
                >>"$log" 2>&1 || status=1
            rm -rf "$tmp/scale-shards"
        fi
        for t in gen load; do
            echo "--- $t: /usr/bin/time -v" >>"$log"; cat "$tmp/$t-time.txt" >>"$log" 2>/dev/null
        done
        grep -E "^(wrote|loaded|  line lists)|Elapsed|Maximum resident" "$log" | tee -a "$out/summary.txt"
        cp "$wl" "$tmp/scale-workload.rpq"
        fi
        "$k2" info "$store" >>"$log" 2>&1 || status=1
        trees=$(find "$store" -name '*.k2' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
        du -sb "$store" | awk -v t="$trees" '{printf "store %.2f GiB, trees %.2f GiB\n", $1/2^30, t/2^30}' \
            | tee -a "$log" "$out/summary.txt"
        budget="${SCALE_GPU_BUDGET:-$(( trees / 2 ))}"
        echo "device budget $budget bytes (the relations' trees: $trees bytes)" | tee -a "$log" "$out/summary.txt"
        for class in ${SCALE_CLASSES:-cv vc cc vv heavy}; do
            step "scale: workload class $class on $engines"
            grep -E "^$class/" "$wl" >"$tmp/scale-$class.rpq" || continue
            left=$(( deadline - SECONDS ))
            if [ "$left" -lt 5 ]; then echo "skipped: SCALE_SECONDS spent" | tee -a "$out/summary.txt"; continue; fi
            timeout "$left" "$kb" workload --store "$store" --queries "$tmp/scale-$class.rpq" --engines "$engines" \
                --repeats "${SCALE_REPEATS:-3}" --warmup 0 --timeout 60 --gpu-budget "$budget" --quiet --stats \
                --json "$tmp/scale-$class.json" >>"$log" 2>&1 || status=1
            cat "$tmp/scale-$class.json" >>"$out/scale-workload.json" 2>/dev/null
            grep -E "^$class +k2rpq-" "$log" | tee -a "$out/summary.txt"
        done ;;
    sparql)
        codex_store
        step "CoDEx-M mixed SPARQL workload (gpu, cpu, oxigraph)"
        timeout 400 "$kb" workload --store "$tmp/codex-m.store" --queries sparql/codex-m-mixed.rq --engines gpu,cpu,oxigraph \
            --repeats "${SPARQL_REPEATS:-5}" --warmup 1 --quiet --stats --json "$out/workload-mixed.json" >"$out/workload-mixed.txt" 2>&1 || status=1
        sed -n '/^Summary/,$p' "$out/workload-mixed.txt" | head -14
        step "CoDEx-M mixed SPARQL workload, every path on the GPU (--force-gpu)"
        timeout 300 "$kb" workload --store "$tmp/codex-m.store" --queries sparql/codex-m-mixed.rq --engines gpu,cpu --force-gpu \
            --repeats "${SPARQL_REPEATS:-5}" --warmup 1 --quiet --stats --json "$out/workload-mixed-gpu.json" >"$out/workload-mixed-gpu.txt" 2>&1 || status=1
        sed -n '/^Summary/,$p' "$out/workload-mixed-gpu.txt" | head -14
        cnr_store
        step "cnr-2000 SPARQL many-sources workload (gpu), and all pairs of p+ counted by rpq"
        timeout 200 "$kb" workload --store "$tmp/cnr.store" --queries sparql/cnr-2000.rq --engines gpu --force-gpu --quiet --stats \
            --repeats 3 --warmup 1 --timeout 60 --json "$out/workload-cnr-sparql.json" >"$out/workload-cnr-sparql.txt" 2>&1 || status=1
        sed -n '/^Summary/,$p' "$out/workload-cnr-sparql.txt" | head -14
        ( time timeout 100 "$k2" rpq --store "$tmp/cnr.store" --engine gpu --count --timeout 90 '?x <urn:k2rpq:p>+ ?y' ) 2>&1 \
            | tail -5 | tee "$out/all-pairs.txt"
        step "?x p/p/p ?y on cnr-2000: rpq --count (distinct pairs) and SPARQL COUNT(*) (paths), GPU"
        for _ in $(seq 1 "${PPP_REPEATS:-1}"); do
            /usr/bin/time -f 'rpq %e s' timeout 100 "$k2" rpq --store "$tmp/cnr.store" --engine gpu --count --timeout 90 \
                '?x <urn:k2rpq:p>/<urn:k2rpq:p>/<urn:k2rpq:p> ?y' 2>&1 | tail -2
            /usr/bin/time -f 'query %e s' timeout 100 "$k2" query --store "$tmp/cnr.store" --engine gpu --timeout 90 \
                'SELECT (COUNT(*) AS ?n) WHERE { ?x <urn:k2rpq:p>/<urn:k2rpq:p>/<urn:k2rpq:p> ?y }' 2>&1 | tail -3
            /usr/bin/time -f 'query distinct %e s' timeout 40 "$k2" query --store "$tmp/cnr.store" --engine gpu --timeout 30 \
                'SELECT (COUNT(*) AS ?n) WHERE { SELECT DISTINCT ?x ?y WHERE { ?x <urn:k2rpq:p>/<urn:k2rpq:p>/<urn:k2rpq:p> ?y } }' 2>&1 | tail -3
        done 2>&1 | tee "$out/ppp.txt"
        ;;
    startup)
        codex_store
        step "query start-up: cpu, then gpu with a cold and a warm kernel cache"
        export K2RPQ_KERNEL_CACHE="$tmp/kernels"; rm -rf "$K2RPQ_KERNEL_CACHE"
        q='SELECT (COUNT(*) AS ?n) WHERE { <http://www.wikidata.org/entity/Q183> <http://www.wikidata.org/prop/direct/P530>+ ?y }'
        for e in cpu gpu gpu gpu cpu gpu; do
            K2RPQ_LOG=debug /usr/bin/time -f "$e %e s" "$k2" query --store "$tmp/codex-m.store" --engine "$e" --verbose "$q" 2>&1 | tail -8
        done 2>&1 | tee "$out/startup.txt"
        # A closure from every node needs the device: its start-up includes the driver's.
        q='SELECT (COUNT(*) AS ?n) WHERE { ?x <http://www.wikidata.org/prop/direct/P530>+ ?y }'
        echo "a query that needs the device: $q" | tee -a "$out/startup.txt"
        for e in cpu gpu gpu cpu gpu; do
            K2RPQ_LOG=debug /usr/bin/time -f "$e %e s" "$k2" query --store "$tmp/codex-m.store" --engine "$e" --verbose "$q" 2>&1 | tail -8
        done 2>&1 | tee -a "$out/startup.txt"
        # The driver's share of a start: loading libcuda, cuInit, the primary context.
        python3 - <<'PY' 2>&1 | tee -a "$out/startup.txt"
import ctypes, time
t0 = time.perf_counter(); cu = ctypes.CDLL("libcuda.so.1"); t1 = time.perf_counter()
cu.cuInit(0); t2 = time.perf_counter()
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
cu.cuDeviceGet(ctypes.byref(dev), 0)
cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev); cu.cuCtxSetCurrent(ctx)
free, total = ctypes.c_size_t(), ctypes.c_size_t()
cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)); t3 = time.perf_counter()
print("driver alone: libcuda %.1f ms, cuInit %.1f ms, primary context %.1f ms" % ((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3))
PY
        unset K2RPQ_KERNEL_CACHE ;;
    stream)
        cnr_store
        step "streaming SELECT of ${STREAM_ROWS:-100000000} rows of ?x p+ ?y on cnr-2000: time and peak RSS"
        for e in ${STREAM_ENGINES:-gpu}; do
            /usr/bin/time -f "$e %e s, %M KB peak RSS" timeout 400 "$k2" query --store "$tmp/cnr.store" --engine "$e" \
                --format tsv --limit "${STREAM_ROWS:-100000000}" 'SELECT ?x ?y WHERE { ?x <urn:k2rpq:p>+ ?y }' 2>&1 >/dev/null | tail -2
        done 2>&1 | tee "$out/stream.txt" ;;
    endpoint)
        codex_store
        port_up() { for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.2; done; return 1; }
        step "endpoint load test, k2rpq serve: CoDEx-M path workload, 64 clients"
        "$k2" serve --store "$tmp/codex-m.store" --bind 127.0.0.1:7878 >"$out/serve-k2rpq.log" 2>&1 & spid=$!
        port_up 7878 && "$kb" endpoint --url http://127.0.0.1:7878/query --queries sparql/codex-m.rpq --clients 64 \
            --duration "${ENDPOINT_SECONDS:-30}" --warmup 5 --pid $spid --json "$out/endpoint-k2rpq.json" 2>&1 | tail -12 || status=1
        kill -TERM $spid; wait $spid
        if [ ! -x "$bin/oxigraph" ]; then
            echo "no oxigraph binary in the carry (build with oxigraph-cli on the PATH): the peer is skipped"
            continue
        fi
        step "endpoint load test, oxigraph serve-read-only: same data and workload"
        rm -rf "$tmp/ox"; "$bin/oxigraph" load --location "$tmp/ox" --file fixtures/codex/codex-m.nt.gz >/dev/null 2>&1
        "$bin/oxigraph" serve-read-only --location "$tmp/ox" --bind 127.0.0.1:7879 >"$out/serve-oxigraph.log" 2>&1 & opid=$!
        port_up 7879 && "$kb" endpoint --url http://127.0.0.1:7879/query --queries sparql/codex-m.rpq --clients 64 \
            --duration "${ENDPOINT_SECONDS:-30}" --warmup 5 --pid $opid --json "$out/endpoint-oxigraph.json" 2>&1 | tail -12 || status=1
        kill -TERM $opid; wait $opid ;;
    embedding)
        step "embedding: inserts through K2Store against Oxigraph's own, query overhead"
        for i in 1 2 3; do "$kb" embedding --quads 200000 2>&1 || status=1; done | tee "$out/embedding.txt" ;;
    *) echo "unknown part $part (tests spmv rpq load multi scale sparql startup stream embedding endpoint)"; status=1 ;;
    esac; done
    exit $status
    ;;
*)
    sed -n '2,15p' "$0"; exit 2 ;;
esac
