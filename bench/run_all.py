"""Run the benchmarks and print one table: every figure next to its baseline from the same run.

    python bench/run_all.py                      # everything, full sizes (about an hour on 2 cores)
    python bench/run_all.py --quick              # everything, small sizes: a smoke run (minutes)
    python bench/run_all.py --only ingest,scale  # some of them
    python bench/run_all.py --ingest-rows 500000 --scale-cabinets 10,50   # sizes per benchmark

Options of each benchmark are its own (``python bench/<name>.py --help``) prefixed by its name.
Databases: OPTIMA_BENCH_DATABASE_URL, else OPTIMA_TEST_DATABASE_URL, else an embedded PostgreSQL;
each benchmark works in throwaway databases it drops. Results also go to bench/results/*.json.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness

#: In the order they run: the cheap in-process ones first, the deployments last.
BENCHMARKS = [
    "wb_parse",
    "ingest",
    "rnp_recompute",
    "merge_backlog",
    "ops_metrics_scrape",
    "definitions_scale",
    "engines_cadence",
    "wb_sim",
    "orchestration",
    "freshness",
    "rnp_batching",
    "scale",
]


def main(argv: list[str] | None = None) -> int:
    modules = [importlib.import_module(f"bench.{name}") for name in BENCHMARKS]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every benchmark")
    parser.add_argument("--only", default="", help=f"comma-separated benchmarks (of {', '.join(BENCHMARKS)})")
    for module in modules:
        harness.add_options(parser, module, prefix=f"{harness.name_of(module)}-")
    args = parser.parse_args(argv)
    chosen = [n.strip() for n in args.only.split(",") if n.strip()] or BENCHMARKS
    unknown = sorted(set(chosen) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    return harness.run_modules([m for m in modules if harness.name_of(m) in chosen], args, prefixed=True)


if __name__ == "__main__":
    sys.exit(main())
