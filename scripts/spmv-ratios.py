#!/usr/bin/env python3
"""Full-precision ratios to cuSPARSE from `k2rpq-bench spmv --json` files.

    python3 scripts/spmv-ratios.py [--match SUBSTRING ...] RUN.json [RUN.json ...]

For each file, each bit-packed measurement whose contender holds one of the SUBSTRINGs
(default: `rowgrp`, `rowwin`) prints every variant's median and its ratio to cuSPARSE's
SpMM of the same direction and width (per source over per vector), to five digits: the
table `spmv` prints rounds ratios to three, too coarse for a target at 0.05x.
"""
import json
import sys


def main(argv):
    matches, files = [], []
    it = iter(argv)
    for a in it:
        if a == "--match":
            matches.append(next(it))
        else:
            files.append(a)
    matches = matches or ["rowgrp", "rowwin"]
    for f in files:
        ms = json.load(open(f))["measurements"]
        spmm = {
            (m["direction"], m["batch"]): m["timing"]["median_ms"]
            for m in ms
            if m["contender"] == "cusparse" and m["batch"] > 1
        }
        for m in ms:
            if not m["bit_packed"] or not any(s in m["contender"] for s in matches):
                continue
            ref = spmm.get((m["direction"], m["batch"]))
            # Bit-packed rows are one measurement per variant, with `variants` empty.
            own = {"variant": m["variant"], "median_ms": m["timing"]["median_ms"]}
            for v in m["variants"] or [own]:
                ratio = f"{v['median_ms'] / ref:.5f}x" if ref else "-"
                print(
                    f"{f}\t{m['contender']}\t{v['variant']}\t{m['direction']}\t{m['batch']}"
                    f"\t{v['median_ms'] * 1e3:.3f} us\t{ratio}\tcuSPARSE SpMM {ref * 1e3 if ref else 0:.2f} us"
                )


if __name__ == "__main__":
    main(sys.argv[1:])
