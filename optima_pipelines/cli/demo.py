"""`optima-pipelines demo`: the whole path on this machine, with nothing to configure.

It starts the embedded PostgreSQL (unless OPTIMA_DATABASE_URL is set) and the WB simulator,
registers the simulator's cabinets, loads their orders and sales for the last days through Dagster
runs recorded in the deployment's own storage (so `optima-pipelines dev` shows them afterwards, and
brings the same simulator back), and prints what arrived per cabinet and day.
"""

from __future__ import annotations

import os
import time
from datetime import date, timedelta

import click

from optima_pipelines.errors import OptimaError
from optima_pipelines.operations.runtime import Deployment, open_deployment
from optima_pipelines.orchestration.queues import RE_AGGREGATE, TAG_QUEUE, TAG_TRIGGER, queue_tags
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse import cabinets as repo

DEMO_TIME_SCALE = 60.0
#: The runs' own log lines go to their event log (the UI shows them); the terminal gets the summary.
QUIET = {
    "loggers": {"console": {"config": {"log_level": "WARNING"}}}
}  # WB's 1-request-a-minute statistics limit becomes one a second


def register_simulated_cabinets(dep: Deployment, tokens: dict[str, str]) -> None:
    cipher = dep.cipher()
    with dep.connect() as conn:
        existing = {c.id for c in repo.list_cabinets(conn)}
        for cabinet_id, token in tokens.items():
            if cabinet_id in existing:  # registered by an earlier demo: refresh its token and status
                repo.set_token(conn, cipher, cabinet_id, token)
                repo.set_status(conn, cabinet_id, "active")
            else:
                repo.add_cabinet(conn, cipher, cabinet_id, f"Demo shop {cabinet_id.rsplit('-', 1)[-1]}", token)
        conn.commit()


def print_summary(dep: Deployment, cabinet_ids: list[str], first_day: date) -> None:
    """The РНП per cabinet and day (rnp_daily summed over products): what a seller opens first."""
    query = """
        SELECT cabinet_id, day, sum(orders_count), sum(cancellations_count), sum(orders_sum),
               sum(buyouts_count), sum(returns_count), sum(ad_spend), sum(payout)
        FROM rnp_daily WHERE cabinet_id = ANY(%s) AND day >= %s
        GROUP BY 1, 2 ORDER BY 1, 2
    """
    with dep.connect() as conn:
        rows = conn.execute(query, (cabinet_ids, first_day)).fetchall()
    header = (
        f"{'cabinet':<8} {'day':<10} {'orders':>6} {'cancel':>6} {'ordered, ₽':>13} {'buyout':>6} {'return':>6} "
        f"{'ad spend, ₽':>12} {'payout, ₽':>13}"
    )
    current = None
    for cabinet, day, orders, cancelled, ordered, buyouts, returns, ad_spend, payout in rows:
        if cabinet != current:
            click.echo("")
            click.echo(header)
            current = cabinet
        click.echo(
            f"{cabinet:<8} {day.isoformat():<10} {orders:>6} {cancelled:>6} {ordered:>13,.2f} {buyouts:>6} {returns:>6} "
            f"{ad_spend:>12,.2f} {payout:>13,.2f}"
        )


def print_landing(cabinet_ids: list[str]) -> None:
    """Where WB's answers of the demo landed (docs/landing.md), and how to rebuild from them."""
    from optima_pipelines.landing.store import describe_url, process_landing

    landing = process_landing()
    if landing is None:
        click.echo("\nthe landing is off (OPTIMA_LANDING_URL=off): no WB answer was kept")
        return
    files = landing.files()
    answers = sum(landing.read_file(path).num_rows for path in files)
    click.echo(
        f"\nlanded {answers} WB answers in {len(files)} Parquet files under {describe_url(landing.url)}; "
        f"`optima-pipelines replay --cabinet {cabinet_ids[0]} --feed all --from {today_moscow().isoformat()}` "
        "rebuilds a cabinet's tables from them without asking WB"
    )


@click.command("demo")
@click.option(
    "--days", default=14, show_default=True, type=click.IntRange(1, 90), help="Moscow days to load, today included."
)
@click.option("--cabinets", default=3, show_default=True, type=click.IntRange(1, 20), help="Simulated cabinets.")
@click.option("--seed", default=1, show_default=True, type=int, help="Seed of the simulated data.")
def demo_cmd(days: int, cabinets: int, seed: int) -> None:
    """Load simulated WB cabinets through Dagster and print what arrived (embedded database by default)."""
    from dagster import DagsterInstance

    from wb_simulator.demo import SimSetup
    from wb_simulator.server import serve

    started = time.monotonic()
    setup = SimSetup(seed=seed, cabinets=cabinets, prefix="demo", time_scale=DEMO_TIME_SCALE)
    with open_deployment() as dep:
        sim, tokens = setup.build()
        with serve(sim) as base_url:
            click.echo(f"database: {dep.masked_url()} (environment {dep.settings.env})")
            click.echo(f"WB simulator: {base_url} (seed {seed}, {cabinets} cabinets)")
            register_simulated_cabinets(dep, tokens)
            setup.save(dep.settings.state_dir)  # `optima-pipelines dev` serves this simulator again
            dep.apply_env()
            os.environ["OPTIMA_WB_BASE_URL"] = base_url
            os.environ["OPTIMA_WB_TIME_SCALE"] = str(setup.time_scale)

            from optima_pipelines.assets.rnp import rnp_recompute_job
            from optima_pipelines.definitions import defs
            from optima_pipelines.partitions import CABINETS_NAME, RANGE_END_TAG, RANGE_START_TAG, cabinet_day_key

            first_day = today_moscow() - timedelta(days=days - 1)
            rnp = defs.resolve_job_def(rnp_recompute_job.name)
            with DagsterInstance.get() as instance:
                instance.add_dynamic_partitions(CABINETS_NAME, setup.cabinet_ids())
                for cabinet_id in setup.cabinet_ids():
                    # Every feed the РНП reads, as its schedules would load them, over the demo's days.
                    for job_name, config in _feeds(days):
                        job = defs.resolve_job_def(job_name)
                        result = job.execute_in_process(
                            run_config={**cabinet_run_config(job_name, cabinet_id, **config), **QUIET},
                            instance=instance,
                            tags={
                                **job.tags,
                                **queue_tags(job.tags[TAG_QUEUE], cabinet_id=cabinet_id),
                                TAG_TRIGGER: "demo",
                            },
                            raise_on_error=False,
                        )
                        _check(result, f"{job_name} of {cabinet_id}")
                    # The РНП of the loaded days, as the re-aggregation sensor would request it.
                    result = rnp.execute_in_process(
                        run_config=QUIET,
                        instance=instance,
                        tags={
                            **queue_tags(RE_AGGREGATE),
                            TAG_TRIGGER: "demo",
                            RANGE_START_TAG: str(cabinet_day_key(cabinet_id, first_day)),
                            RANGE_END_TAG: str(cabinet_day_key(cabinet_id, today_moscow())),
                        },
                        raise_on_error=False,
                    )
                    _check(result, f"the РНП of {cabinet_id}")
                    click.echo(
                        f"synced {cabinet_id} (orders, sales, finance report, ads, funnel, stocks) and rebuilt its РНП"
                    )
            print_summary(dep, setup.cabinet_ids(), first_day)
            print_landing(setup.cabinet_ids())
    click.echo("")
    click.echo(f"done in {time.monotonic() - started:.0f} s. `optima-pipelines dev` shows these runs and partitions.")


def _feeds(days: int) -> list[tuple[str, dict]]:
    """The sync jobs the demo runs per cabinet, with the config that covers its days."""
    return [
        # Orders of WB's whole 90 days, as the nightly backfill loads them: report lines of the demo's
        # days whose orders are older still find their order's day.
        ("digitization_backfill", {"window_days": 90}),
        ("finance_sync", {}),  # the last 14 days of the realization report, as nightly
        ("ads_sync", {"window_days": days}),
        ("funnel_sync", {"window_days": days}),
        ("inventory_sync", {}),  # today's stocks snapshot
    ]


def _check(result, what: str) -> None:  # type: ignore[no-untyped-def]
    if not result.success:
        raise OptimaError(f"{what} failed (run {result.run_id}); open it in the UI (optima-pipelines dev)")


def register(cli: click.Group) -> None:
    cli.add_command(demo_cmd)
