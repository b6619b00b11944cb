"""`optima-pipelines wb-sim`: the WB API simulator, standalone, for the demo and manual testing.

The simulator is test tooling (package wb_simulator); only this command imports it, lazily, so the
deployment's code paths never do.
"""

from __future__ import annotations

import click

from optima_pipelines.errors import ConfigError


@click.command("wb-sim")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8123, show_default=True, type=int, help="Port to listen on (0: any free port).")
@click.option("--seed", default=1, show_default=True, type=int, help="Seed of the generated data.")
@click.option("--cabinets", default=3, show_default=True, type=int, help="How many seller cabinets to simulate.")
@click.option("--orders-per-day", default=300, show_default=True, type=int, help="Average orders a day per cabinet.")
@click.option("--prefix", default="sim", show_default=True, help="Cabinet ids are <prefix>-1, <prefix>-2, ...")
@click.option(
    "--time-scale",
    default=1.0,
    show_default=True,
    type=float,
    help="How much faster than real time WB's rate limits refill (a client must use the same scale).",
)
def wbsim_cmd(
    host: str, port: int, seed: int, cabinets: int, orders_per_day: int, prefix: str, time_scale: float
) -> None:
    """Serve a simulated WB seller API on HTTP and print its base URL and one token per cabinet.

    Point the deployment at it with OPTIMA_WB_BASE_URL=<base URL>. The tokens are the simulator's
    own throwaway tokens (every category, personal). Ctrl-C stops it.
    """
    if not 1 <= cabinets <= 50:
        raise ConfigError(f"--cabinets must be from 1 to 50, got {cabinets}")
    if orders_per_day < 0:
        raise ConfigError(f"--orders-per-day must not be negative, got {orders_per_day}")
    if not time_scale > 0:
        raise ConfigError(f"--time-scale must be positive, got {time_scale}")
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be from 0 to 65535, got {port}")
    from wb_simulator.demo import SimSetup
    from wb_simulator.server import bind, run_forever

    sim, tokens = SimSetup(seed, cabinets, orders_per_day, prefix, time_scale).build()
    try:
        sock = bind(host, port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    click.echo(f"WB simulator: http://{host}:{sock.getsockname()[1]}  (seed {seed}, time scale {time_scale:g})")
    click.echo(f"export OPTIMA_WB_BASE_URL=http://{host}:{sock.getsockname()[1]}")
    for cabinet_id, token in tokens.items():
        click.echo(f"cabinet {cabinet_id}: {token}")
    run_forever(sim, sock)


def register(cli: click.Group) -> None:
    cli.add_command(wbsim_cmd)
