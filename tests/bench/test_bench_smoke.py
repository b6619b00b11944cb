"""The benchmarks' own code paths at a tiny size: they load, compare and report what they claim.

No timing is asserted here (benchmarks time things, tests do not): each test checks that a
benchmark produces its figures, each with a baseline from the same run, and that its internal
checks hold (the same rows loaded every way, the same mart from SQL and pandas).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import types

import pytest

from bench import check_evaluations, definitions_scale, harness, ingest, merge_backlog, rnp_recompute, run_all

#: A long file (30 s or more): it runs before the short ones (tests/conftest.py's order).
pytestmark = pytest.mark.long


def run_one(module, **sizes) -> harness.Bench:  # type: ignore[no-untyped-def]
    opts = harness.resolve_options(argparse.Namespace(), module, quick=True)
    for key, value in sizes.items():
        setattr(opts, key, value)
    bench = harness.Bench(quick=True)
    bench.current = harness.name_of(module)
    with bench:
        module.run(bench, opts)
    return bench


def test_ingest_loads_the_same_rows_three_ways_and_reports_each_against_its_baseline() -> None:
    bench = run_one(ingest, rows=[1500], pandas_max_rows=1500)
    names = {f.name: f for f in bench.figures}
    fresh = names["wb_orders fresh load, 1k rows (parse + merge)"]
    assert fresh.baseline_name == "raw COPY into an unlogged table" and fresh.baseline and fresh.value > 0
    assert names["wb_orders fresh load, 1k rows, vs pandas"].baseline_name == "pandas.DataFrame.to_sql"
    assert "wb_orders re-run changing nothing, 1k rows" in names


def test_ingest_refuses_figures_when_the_loaded_table_differs_from_the_raw_copy(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = ingest.copy_raw

    def copy_one_row_less(env, tuples, cpu):  # type: ignore[no-untyped-def]
        real(env, tuples[:-1], cpu)

    monkeypatch.setattr(ingest, "copy_raw", copy_one_row_less)
    with pytest.raises(RuntimeError, match="disagree"):
        run_one(ingest, rows=[500], pandas_max_rows=0)


def test_rnp_recompute_reports_sql_against_pandas_and_one_changed_day() -> None:
    bench = run_one(rnp_recompute, days=3, products=20)
    assert [f.baseline_name for f in bench.figures] == ["pandas, rnp_daily only", "pandas", "pandas, same day"]
    assert all(f.value > 0 and f.baseline for f in bench.figures)


def test_merge_backlog_heals_every_stale_day_and_reports_both_nights_against_their_baselines() -> None:
    bench = run_one(merge_backlog, cabinets=4, products=2, days=9, stale=2)
    assert [f.baseline_name for f in bench.figures] == [
        "the same night planned as before issue 38",
        "the night without a backlog (same run)",
        "the plan's read of the days to heal",
    ]
    assert "(8 healed)" in bench.figures[1].name  # 2 stale days × 4 cabinets, none left (else it exits)
    assert all(f.value > 0 and f.baseline for f in bench.figures)


def test_merge_backlog_refuses_figures_when_the_merge_leaves_a_stale_day(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = merge_backlog.plan_merge_sync

    def without_stale(conn, cabinets, today, first_day):  # type: ignore[no-untyped-def]
        plan = real(conn, cabinets, today, first_day)
        for pair in plan.stale:
            plan.demands.pop(pair, None)
        return plan

    monkeypatch.setattr(merge_backlog, "plan_merge_sync", without_stale)
    with pytest.raises(SystemExit, match="left 8 stale"):
        run_one(merge_backlog, cabinets=4, products=2, days=9, stale=2)


def test_rnp_recompute_refuses_figures_when_one_cell_differs_from_pandas(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    real = rnp_recompute.pandas_rollup

    def one_kopeck_off(conn, first, last):  # type: ignore[no-untyped-def]
        mart, timings, rollups = real(conn, first, last)
        mart.loc[0, "payout"] += 1  # kopecks
        return mart, timings, rollups

    monkeypatch.setattr(rnp_recompute, "pandas_rollup", one_kopeck_off)
    with pytest.raises(SystemExit, match="disagree in 1 columns of rnp_daily"):
        run_one(rnp_recompute, days=3, products=20)
    assert "MISMATCH rnp_daily.payout: 1 rows" in capsys.readouterr().err


@pytest.mark.parametrize(("table", "column"), [("rnp_sales", "cancellations_sum"), ("rnp_finance", "acquiring")])
def test_rnp_recompute_checks_every_rollup_cell_by_cell(monkeypatch, capsys, table, column) -> None:  # type: ignore[no-untyped-def]
    real = rnp_recompute.pandas_rollup

    def one_rollup_kopeck_off(conn, first, last):  # type: ignore[no-untyped-def]
        mart, timings, rollups = real(conn, first, last)
        rollups[table].loc[0, column] += 1  # kopecks; the mart stays right
        return mart, timings, rollups

    monkeypatch.setattr(rnp_recompute, "pandas_rollup", one_rollup_kopeck_off)
    with pytest.raises(SystemExit, match=f"disagree in 1 columns of {table}"):
        run_one(rnp_recompute, days=3, products=20)
    assert f"MISMATCH {table}.{column}: 1 rows" in capsys.readouterr().err


def test_definitions_scale_ticks_every_registered_sensor_and_schedule() -> None:
    from optima_pipelines.definitions import defs

    bench = run_one(definitions_scale, cabinets=3, events=40, runs=20)
    repo = defs.get_repository_def()
    expected = {f"sensor {s.name}" for s in repo.sensor_defs} | {f"schedule {s.name}" for s in repo.schedule_defs}
    ticked = {f.name.split(" tick,")[0] for f in bench.figures if " tick," in f.name}
    assert ticked == expected
    assert all(f.baseline for f in bench.figures)


def test_results_and_table_name_the_machine_and_every_baseline(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    bench = harness.Bench()
    bench.current = "demo"
    bench.figure("rows loaded", 200.0, "rows/s", baseline_name="raw COPY", baseline=400.0, higher_is_better=True)
    bench.figure("recompute", 50.0, "ms", baseline_name="pandas", baseline=100.0, higher_is_better=False)
    text = harness.table(bench.figures)
    assert "raw COPY: 400 rows/s" in text and "2.0× worse" in text and "2.0× better" in text
    info = harness.machine(bench.server_url)
    path = harness.write_results(["demo"], info, bench, {})
    body = json.loads(path.read_text())
    assert body["machine"]["postgresql"] and body["machine"]["cores"] and body["machine"]["load_average_at_start"]
    assert [f["ratio"] for f in body["figures"]] == [0.5, 0.5]
    bench.__exit__(None, None, None)


def test_run_all_names_an_unknown_benchmark(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit):
        run_all.main(["--only", "ingest,nonsense"])
    assert "unknown benchmark(s) nonsense" in capsys.readouterr().err


def test_quantiles() -> None:
    assert harness.quantile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert harness.quantile([float(i) for i in range(1, 101)], 0.95) == pytest.approx(95.05)


def test_a_figure_of_zero_is_compared_without_a_factor() -> None:
    """The scale benchmark's "largest N holding every cadence" is 0 when no N held: its table still prints."""
    none_held = harness.Figure("scale", "largest N", 0, "cabinets", "largest N measured", 100, True, 1.0)
    assert none_held.verdict() == "worse (0)"
    nothing_left = harness.Figure("x", "queue wait", 0, "s", "baseline", 30, False, 1.0)
    assert nothing_left.verdict() == "better (0)"
    assert "worse (0)" in harness.table([none_held])


def test_check_evaluations_reports_the_batch_against_dagsters_own_one_by_one() -> None:
    bench = run_one(check_evaluations, partitions=12, rounds=1)
    assert [f.baseline_name for f in bench.figures] == ["one by one (Dagster's own)"] * 3
    process_cpu, postgres_cpu, wall = bench.figures
    assert all(f.value > 0 and f.baseline for f in (process_cpu, wall))
    # The PostgreSQL figure is the whole server's CPU over the run: in the suite, the other workers'
    # load on the same server is most of it, and it can come out at or below zero. Measured, not judged.
    assert postgres_cpu.baseline is not None


def test_a_terminated_benchmark_stops_what_it_started_and_exits_143(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`kill <bench>` unwinds the benchmark like Ctrl-C: what it entered (a deployment, in scale.py) is
    exited, no table is written as if it had finished, and the exit code says it was terminated."""
    exited = []

    class Started:
        def __enter__(self):  # type: ignore[no-untyped-def]
            return self

        def __exit__(self, *exc) -> None:  # type: ignore[no-untyped-def]
            exited.append(exc[0])

    def run(bench, opts) -> None:  # type: ignore[no-untyped-def]
        with Started():
            os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("SIGTERM did not interrupt the benchmark")

    module = types.ModuleType("terminated")
    module.__file__ = "bench/terminated.py"
    module.TITLE, module.OPTIONS, module.run = "terminated", [], run  # type: ignore[attr-defined]
    monkeypatch.setattr(harness, "write_results", lambda *a, **k: pytest.fail("results written for a killed run"))
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as ended:
        harness.run_modules([module], argparse.Namespace(quick=True), prefixed=False)
    assert ended.value.code == 143
    assert exited == [SystemExit]
    assert signal.getsignal(signal.SIGTERM) is before
