#!/usr/bin/env bash
# GPU test suite: build the release test binaries here, run them on the device machine.
#
#   scripts/gpu-suite.sh --build    # here: build release test binaries + the k2rpq binary,
#                                   # copy them (and cnr-2000) into $CARRY_DIR
#   bash .carry/gpu/gpu-suite.sh --device   # there: run every carried test binary with
#                                   # --nocapture --test-threads=1, logs tee'd into $OUT
#
# CARRY_DIR defaults to <repo root>/.carry/gpu (git-ignored). The device machine receives the
# main checkout: build with CARRY_DIR=/work/main/.carry/gpu and pass carry [".carry/gpu"].
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# --build copies this script next to the binaries, so on the device (which receives the
# main checkout, not this worktree) it runs as .carry/gpu/gpu-suite.sh.
if [ -d "$here/bin" ]; then carry="$here"; else carry="${CARRY_DIR:-$root/.carry/gpu}"; fi

case "${1:-}" in
--build)
    cd "$root"
    mkdir -p "$carry/bin" "$carry/data"
    rm -f "$carry"/bin/*
    # The test binaries are named by cargo's JSON messages (executable of each test target).
    cargo test --release --test gpu_engine --no-run --message-format=json \
        | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])
' | while read -r exe; do
        cp "$exe" "$carry/bin/$(basename "$exe" | sed 's/-[0-9a-f]*$//')"
    done
    cargo build --release --bin k2rpq
    cp target/release/k2rpq "$carry/bin/k2rpq"
    # shared/ sits beside the checkout (../shared), or beside the worktrees' folder.
    for data in "$root/../shared/data/cnr-2000/cnr-2000.arcs.tsv.gz" \
        "$root/../../shared/data/cnr-2000/cnr-2000.arcs.tsv.gz"; do
        if [ -f "$data" ]; then cp "$data" "$carry/data/"; break; fi
    done
    cp "$here/gpu-suite.sh" "$carry/gpu-suite.sh"
    du -sh "$carry"
    ls -l "$carry/bin"
    ;;
--device)
    out="${OUT:-$carry/out}"
    mkdir -p "$out"
    export K2RPQ_CNR2000="$carry/data/cnr-2000.arcs.tsv.gz"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/device.txt" || true
    "$carry/bin/k2rpq" --version | tee -a "$out/device.txt"
    status=0
    for t in "$carry"/bin/*; do
        name="$(basename "$t")"
        [ "$name" = k2rpq ] && continue
        echo "=== $name" | tee -a "$out/summary.txt"
        if "$t" --nocapture --test-threads=1 2>&1 | tee "$out/$name.log"; then
            echo "=== $name: ok" | tee -a "$out/summary.txt"
        else
            echo "=== $name: FAILED" | tee -a "$out/summary.txt"
            status=1
        fi
    done
    exit $status
    ;;
*)
    echo "usage: $0 --build | --device" >&2
    exit 2
    ;;
esac
