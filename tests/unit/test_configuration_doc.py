"""One source of every setting: optima_pipelines/settings.py ENVIRONMENT_VARIABLES. docs/configuration.md
is generated from it, the code reads its defaults from it, and no other file states another default."""

import ast
import re
from pathlib import Path

import pytest
import yaml

from optima_pipelines.settings import ENVIRONMENT_VARIABLES, configuration_markdown, default, load_settings

TOP = Path(__file__).resolve().parents[2]
REGENERATE = "python -m optima_pipelines.settings --markdown > docs/configuration.md"
#: The instance configuration: the top-level file and the packaged copy `optima-pipelines` installs.
DAGSTER_YAMLS = [TOP / "dagster.yaml", TOP / "optima_pipelines" / "deploy" / "dagster.yaml"]


def test_configuration_doc_is_generated_from_the_settings():
    written = (TOP / "docs" / "configuration.md").read_text()
    assert written == configuration_markdown(), f"docs/configuration.md is out of date: run `{REGENERATE}`"


def test_every_variable_has_a_meaning_and_a_default_or_what_unset_means():
    for name, var in ENVIRONMENT_VARIABLES.items():
        assert var.meaning.strip(), name
        assert (var.default is None) != (not var.unset), f"{name}: give a default or say what unset means, not both"


def _queue_limit(config: dict, key: str, value: str) -> int:
    (limit,) = [i["limit"] for i in config["tag_concurrency_limits"] if i.get("key") == key and i.get("value") == value]
    return int(limit)


@pytest.mark.parametrize("path", DAGSTER_YAMLS, ids=lambda p: str(p.relative_to(TOP)))
def test_dagster_yaml_holds_the_settings_defaults(path):
    """dagster.yaml's limits are what stands when SYNC_QUEUE_CONCURRENCY / OPTIMA_MAX_CONCURRENT_RUNS are
    unset: they must be the defaults the docs state, and no comment may state another."""
    text = path.read_text()
    config = yaml.safe_load(text)["run_coordinator"]["config"]
    assert config["max_concurrent_runs"] == int(default("OPTIMA_MAX_CONCURRENT_RUNS")), path
    assert _queue_limit(config, "optima/queue-class", "sync") == int(default("SYNC_QUEUE_CONCURRENCY")), path
    for name in ENVIRONMENT_VARIABLES:
        for stated in re.findall(rf"\b{name}\b[^.\n]*?\bdefault(?:s to)?\s+([\w.:/-]+)", text):
            assert stated == default(name), f"{path}: says {name} defaults to {stated}, settings.py {default(name)}"


def test_run_workers_hold_as_many_processes_as_runs_at_once():
    """A run the queue lets through but no warm process takes waits in the broker: the run worker's default
    processes and the deploy files' --concurrency are OPTIMA_MAX_CONCURRENT_RUNS's default."""
    from optima_pipelines.operations.processes import RUN_WORKER_CONCURRENCY

    runs = int(default("OPTIMA_MAX_CONCURRENT_RUNS"))
    assert RUN_WORKER_CONCURRENCY == runs
    for path in (TOP / "deploy" / "Procfile", TOP / "deploy" / "systemd" / "optima-run-worker@.service"):
        assert re.findall(r"--concurrency (\d+)", path.read_text()) == [str(runs)], path


def _docs() -> list[Path]:
    return [TOP / "README.md", *sorted((TOP / "docs").glob("*.md"))]


def test_docs_state_no_other_default():
    """`NAME` (default X) and "N … (`NAME`)" in the README and docs/ agree with settings.py."""
    wrong = []
    for path in _docs():
        text = path.read_text()
        for name in ENVIRONMENT_VARIABLES:
            if ENVIRONMENT_VARIABLES[name].default is None:
                continue
            after = re.findall(rf"`{name}`\s*\((?:default|by default)\s+`?([^`,;:)\s]+)", text)
            before = re.findall(rf"\b(\d[\d,]*) [^.()`\d]{{0,30}}\(`{name}`\)", text)
            wrong += [f"{path.name}: {name} {s}" for s in after + before if s.replace(",", "") != default(name)]
    assert not wrong, f"defaults that disagree with optima_pipelines/settings.py: {wrong}"


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_every_environment_variable_the_code_reads_is_declared():
    sources = [
        *(TOP / "optima_pipelines").rglob("*.py"),
        *(TOP / "wb_simulator").rglob("*.py"),
        *(TOP / "bench").rglob("*.py"),
        TOP / "tests" / "conftest.py",
    ]
    pattern = re.compile(r"^(OPTIMA|SYNC|DIGITIZATION)_[A-Z0-9_]+$")
    undeclared = {
        f"{name} ({path.relative_to(TOP)})"
        for path in sources
        for name in _string_constants(path)
        if pattern.match(name) and name not in ENVIRONMENT_VARIABLES
    }
    assert not undeclared, f"declare these in optima_pipelines/settings.py ENVIRONMENT_VARIABLES: {sorted(undeclared)}"


def test_settings_read_their_defaults_from_the_declarations(monkeypatch):
    for name in ENVIRONMENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    s = load_settings()
    assert s.env == default("OPTIMA_ENV")
    assert s.state_dir.name == default("OPTIMA_STATE_DIR")
    assert s.partitions_start == default("OPTIMA_PARTITIONS_START")
    assert s.increment_interval_ms == int(default("DIGITIZATION_INCREMENT_INTERVAL_MS"))
    assert s.run_retention_days == int(default("OPTIMA_RUN_RETENTION_DAYS"))
    assert s.partition_retention_months == int(default("OPTIMA_PARTITION_RETENTION_MONTHS"))
    assert s.cadence_scale == float(default("OPTIMA_CADENCE_SCALE"))
    assert s.sweep_shard_size == int(default("OPTIMA_SWEEP_SHARD_SIZE"))
    assert s.sweep_threads == int(default("OPTIMA_SWEEP_THREADS"))
    assert s.sweep_busy_wait_seconds == float(default("OPTIMA_SWEEP_BUSY_WAIT_SECONDS"))
    assert s.cabinet_lock_wait_seconds == float(default("OPTIMA_CABINET_LOCK_WAIT_SECONDS"))
    assert s.reaggregate_every_seconds == float(default("OPTIMA_REAGGREGATE_EVERY_SECONDS"))
    # Unset, dagster.yaml's limits stand (test_dagster_yaml_holds_the_settings_defaults).
    assert s.max_concurrent_runs is None and s.sync_queue_concurrency is None
