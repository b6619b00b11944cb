"""A whole deployment for system tests: its own environment, the WB simulator, `optima-pipelines dev`."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance
from psycopg import sql

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import ensure_schemas, upgrade
from optima_pipelines.db.urls import dagster_storage_url
from optima_pipelines.operations.runtime import project_file
from optima_pipelines.warehouse.cabinets import add_cabinet
from optima_pipelines.warehouse.secrets import TokenCipher
from tests.system.harness import RunningDeployment, running_dev
from wb_simulator import CabinetSpec, Simulator, serve


@dataclass
class Stack:
    """A running deployment (`optima-pipelines dev`) and the simulated WB it talks to."""

    env: str
    sim: Simulator
    instance: DagsterInstance
    database_url: str
    #: The WB tokens the cabinets were registered with (to prove they never leak).
    tokens: dict[str, str]
    dagster_home: Path
    environment: dict[str, str]
    tmp: Path
    dev: RunningDeployment = field(init=False)
    _dev_cm: Any = field(init=False, default=None)
    #: Options of `optima-pipelines dev` (e.g. ``("--run-workers", "2")``).
    dev_args: tuple[str, ...] = ()

    def start_dev(self) -> RunningDeployment:
        self._dev_cm = running_dev(self.environment, self.tmp, args=self.dev_args)
        self.dev = self._dev_cm.__enter__()
        return self.dev

    def stop_dev(self) -> None:
        """Stop it as an operator does (SIGINT to `dev`), whatever its runs are doing."""
        if self._dev_cm is not None:
            self._dev_cm.__exit__(None, None, None)
            self._dev_cm = None

    def warehouse(self):  # type: ignore[no-untyped-def]
        return connect(self.database_url, f"optima_{self.env}", autocommit=True)


@pytest.fixture(scope="module")
def stack_factory(database_url: str, secret_key: str, tmp_path_factory) -> Iterator:  # type: ignore[no-untyped-def]
    """Builds a Stack with the given cabinets and settings; everything is torn down after the module."""
    created: list[tuple[str, object]] = []

    def build(
        cabinets: list[CabinetSpec],
        *,
        time_scale: float = 60,
        extra_env: dict[str, str] | None = None,
        dev_args: tuple[str, ...] = (),
    ) -> Stack:
        env = f"sys{secrets.token_hex(4)}"
        tmp: Path = tmp_path_factory.mktemp(env)
        upgrade(database_url, f"optima_{env}")
        ensure_schemas(database_url, f"dagster_{env}")
        # The simulated clock follows real time: the daemon's runs happen in real time.
        sim = Simulator(seed=21, cabinets=cabinets, time_scale=time_scale)
        cipher = TokenCipher(secret_key.encode())
        tokens = {spec.id: sim.token(spec.id) for spec in cabinets}
        with connect(database_url, f"optima_{env}", autocommit=True) as conn:
            for spec in cabinets:
                add_cabinet(conn, cipher, spec.id, spec.id.upper(), tokens[spec.id])
        server = serve(sim)
        base_url = server.__enter__()
        environment = {
            "OPTIMA_DATABASE_URL": database_url,
            "OPTIMA_ENV": env,
            "OPTIMA_SECRET_KEY": secret_key,
            "OPTIMA_STATE_DIR": str(tmp / "state"),
            "OPTIMA_DAGSTER_STORAGE_URL": dagster_storage_url(database_url, f"dagster_{env}"),
            "OPTIMA_WB_BASE_URL": base_url,
            "OPTIMA_WB_TIME_SCALE": str(time_scale),
            **(extra_env or {}),
        }
        home = tmp / "instance_home"
        home.mkdir()
        shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
        # The test's own view of the deployment's Dagster storage (dagster.yaml reads the env).
        with pytest.MonkeyPatch.context() as mp:
            for key, value in {**environment, "DAGSTER_HOME": str(home)}.items():
                mp.setenv(key, value)
            instance = DagsterInstance.get()
        stack = Stack(
            env,
            sim,
            instance,
            database_url,
            tokens,
            tmp / "state" / "dagster" / env,
            environment,
            tmp,
            dev_args=dev_args,
        )
        created.append((env, (stack, server, instance)))
        stack.start_dev()
        return stack

    yield build
    for env, (stack, server, instance) in reversed(created):
        stack.stop_dev()
        server.__exit__(None, None, None)
        instance.dispose()
        with connect(database_url, autocommit=True) as conn:
            for schema in (f"optima_{env}", f"dagster_{env}"):
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
