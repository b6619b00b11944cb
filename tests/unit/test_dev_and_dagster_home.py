"""`dev`'s listeners, DAGSTER_HOME's dagster.yaml kept when edited, and what a bad partition key is told."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from optima_pipelines.cli.dev import dev_services
from optima_pipelines.operations.runtime import PACKAGED_STAMP, prepare_dagster_home, project_file
from optima_pipelines.partitions import explain_bad_key
from optima_pipelines.settings import load_settings


def _listens_on(argv: list[str]) -> str:
    return argv[argv.index("--host") + 1]


def test_dev_host_opens_the_ui_but_metrics_stay_on_their_own_address() -> None:
    services = dict(dev_services("127.0.0.1:4000", "m", "0.0.0.0", 3000, "127.0.0.1", 9464, "spawn", 1))
    assert _listens_on(services["webserver"]) == "0.0.0.0"
    assert _listens_on(services["metrics"]) == "127.0.0.1"
    assert "run worker 1" not in services
    chosen = dict(dev_services("127.0.0.1:4000", "m", "127.0.0.1", 3000, "10.0.0.5", 9464, "celery", 2))
    assert _listens_on(chosen["metrics"]) == "10.0.0.5"
    assert {"run worker 1", "run worker 2"} <= set(chosen)
    assert "metrics" not in dict(dev_services("127.0.0.1:4000", "m", "0.0.0.0", 3000, "127.0.0.1", 0, "spawn", 1))


def test_an_edited_dagster_yaml_is_kept_and_said_so_an_untouched_one_follows_the_package(
    tmp_path: Path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPTIMA_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("OPTIMA_ENV", "dev")
    settings = load_settings()
    packaged = project_file("dagster.yaml").read_text()

    home = prepare_dagster_home(settings)
    target = home / "dagster.yaml"
    assert target.read_text() == packaged
    assert capsys.readouterr().err == ""

    # An operator's edit survives the next command, which says so in one line.
    edited = packaged + "\n# ours\nrun_monitoring:\n  enabled: false\n"
    target.write_text(edited)
    prepare_dagster_home(settings)
    assert target.read_text() == edited
    note = capsys.readouterr().err.strip().splitlines()
    assert len(note) == 1 and "keeping your edited" in note[0] and str(target) in note[0]

    # A copy written by an older version, never edited, is replaced by the packaged one, silently.
    import hashlib

    old = "# an older packaged dagster.yaml\n"
    target.write_text(old)
    (home / PACKAGED_STAMP).write_text(hashlib.sha256(old.encode()).hexdigest() + "\n")
    prepare_dagster_home(settings)
    assert target.read_text() == packaged
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("key", "cabinet_day", "expected"),
    [
        ("c1", True, "is not of the form 'CABINET|YYYY-MM-DD'"),
        ("c1|2026-02-30", True, "'2026-02-30' is not a date"),
        ("c1|2024-12-31", True, "day 2024-12-31 is outside the partitions (2025-01-01 .. 2026-12-06"),
        ("c1|2026-12-07", True, "outside the partitions"),
        ("zz|2026-12-01", True, "cabinet 'zz' is not registered (cabinets: c1, c2)"),
        ("c2|2026-12-01", True, "cabinet 'c2' has no partitions yet"),
        ("bad|id", False, "invalid cabinet id 'bad|id'"),
        ("zz", False, "cabinet 'zz' is not registered"),
    ],
)
def test_a_bad_partition_key_is_explained_with_the_valid_form(key: str, cabinet_day: bool, expected: str) -> None:
    line = explain_bad_key(
        key,
        cabinet_day=cabinet_day,
        registered={"c1", "c2"},
        with_partitions={"c1"},
        start=date(2025, 1, 1),
        today=date(2026, 12, 6),
    )
    assert expected in line, line
    assert "\n" not in line
    if "no partitions yet" not in line:
        assert ("CABINET|YYYY-MM-DD" if cabinet_day else "CABINET (a registered cabinet id)") in line
