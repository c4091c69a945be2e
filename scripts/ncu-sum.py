#!/usr/bin/env python3
"""Sums ncu's per-launch durations (`--metrics gpu__time_duration.sum --csv`) per kernel
name, one table per product: a product is the launches after each `k2rpq_hold` kernel
(`profile-descent`, a binary of k2rpq-bench, runs each product once after a hold with
REPS = 0).

    python3 scripts/ncu-sum.py ncu.csv
"""
import csv
import sys
from collections import OrderedDict

UNIT = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6, "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def main(path):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    products = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"].split("(")[0]
        if name == "k2rpq_hold":
            products.append(OrderedDict())
            continue
        if not products:
            continue
        us = float(row["Metric Value"].replace(",", "")) * UNIT[row["Metric Unit"]]
        launches, total = products[-1].get(name, (0, 0.0))
        products[-1][name] = (launches + 1, total + us)
    for i, p in enumerate(products):
        total = sum(t for _, t in p.values())
        count = sum(n for n, _ in p.values())
        print(f"product after hold {i}: {count} launches, {total:.1f} us (kernels alone, serialised)")
        for name, (n, t) in sorted(p.items(), key=lambda kv: -kv[1][1]):
            print(f"  {name:32} {n:5} launches {t:10.1f} us  {100 * t / total:5.1f} %")


if __name__ == "__main__":
    main(sys.argv[1])
