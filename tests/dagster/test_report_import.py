"""User report imports (`import-user-report`): the seller portal's xlsx/csv into wb_report_lines, all or nothing."""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from datetime import timedelta
from decimal import Decimal

import pytest

from optima_pipelines.definitions import defs
from optima_pipelines.sync import finance as fin
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse import requests as outbox
from tests.report_files import PORTAL_COLUMNS, moscow_day, write_csv, write_xlsx
from tests.rnp_feeds import due_days
from tests.wb_syncs import evaluate_requests_sensor, materializations, money, run_job, served, simulator
from wb_simulator import CabinetSpec

#: A long file (30 s or more): it runs before the short ones (tests/conftest.py's order).
pytestmark = pytest.mark.long

MONEY = {
    "retail_amount": "retailAmount",
    "for_pay": "forPay",
    "delivery_service": "deliveryService",
    "acquiring_fee": "acquiringFee",
    "vw": "vw",
    "vw_nds": "vwNds",
    "penalty": "penalty",
    "paid_storage": "paidStorage",
    "paid_acceptance": "paidAcceptance",
    "deduction": "deduction",
}


@pytest.fixture(scope="module")
def sim():
    return simulator(
        CabinetSpec(id="c1", products=20, orders_per_day=250, history_days=45, campaigns=1),
        CabinetSpec(id="c2", products=8, orders_per_day=20, history_days=45, campaigns=1),
    )


@pytest.fixture
def wb(sim, optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def request_import(conn, instance, cabinet: str, payload: dict):
    """Create the request, let the requests sensor launch it, run it in process; the request afterwards."""
    request_id = outbox.create_request(conn, "import-user-report", cabinet, payload)
    result = evaluate_requests_sensor(instance)
    runs = list(getattr(result, "run_requests", None) or [])
    for run_request in runs:
        assert run_request.run_key == f"request-{request_id}"
        assert run_request.tags["optima/queue"] == "digitization-sync"
        assert int(run_request.tags["dagster/priority"]) > 0
        job = defs.get_job_def(run_request.job_name)
        job.execute_in_process(
            run_config=run_request.run_config, instance=instance, tags=run_request.tags, raise_on_error=False
        )
        evaluate_requests_sensor(instance)  # copies the run's outcome onto the request
    return outbox.get_request(conn, request_id)


def materializations_retried(instance) -> int:  # type: ignore[no-untyped-def]
    """Steps of every run so far that asked for a retry."""
    from dagster import DagsterEventType, EventRecordsFilter

    return len(instance.get_event_records(EventRecordsFilter(event_type=DagsterEventType.STEP_UP_FOR_RETRY)))


def lines_in_warehouse(conn, cabinet: str) -> Counter:
    cols = ", ".join(MONEY)
    rows = conn.execute(
        f"SELECT srid, seller_oper_name, day, {cols} FROM wb_report_lines WHERE cabinet_id = %s", (cabinet,)
    ).fetchall()
    return Counter((r[0] or "", r[1], r[2], *r[3:]) for r in rows)


def lines_of_truth(lines) -> Counter:
    return Counter(
        (
            line["srid"],
            line["sellerOperName"],
            moscow_day(line["saleDt"]),
            *(money(line[name]) for name in MONEY.values()),
        )
        for line in lines
    )


def sums_by_day(counter: Counter) -> dict:
    sums: dict = defaultdict(lambda: [Decimal(0)] * len(MONEY))
    for key, n in counter.items():
        for i, v in enumerate(key[3:]):
            sums[key[2]][i] += v * n
    return dict(sums)


def test_an_xlsx_of_10k_lines_imports_to_the_kopeck(wb, warehouse_conn, dagster_instance, tmp_path):
    today = today_moscow()
    first, last = today - timedelta(days=30), today - timedelta(days=8)
    lines = wb.truth.report_lines("c1", first, last)
    assert len(lines) >= 10_000
    path = write_xlsx(tmp_path / "Детализация отчета № 1234567.xlsx", lines)

    request = request_import(warehouse_conn, dagster_instance, "c1", {"path": str(path)})
    assert request.status == "succeeded", request.error
    assert request.result["lines_in_file"] == len(lines)
    assert request.result["unknown_headers"] == []  # every column of the portal's export is understood
    assert request.result["wb_report_lines"]["rows_inserted"] == len(lines)

    ours = lines_in_warehouse(warehouse_conn, "c1")
    assert ours == lines_of_truth(lines)
    assert sums_by_day(ours) == sums_by_day(lines_of_truth(lines))
    sources = warehouse_conn.execute("SELECT DISTINCT source, request_id FROM wb_report_lines").fetchall()
    assert sources == [("user_report", request.id)]

    mats = materializations(dagster_instance, "wb_report_lines")
    per_day = Counter(moscow_day(line["saleDt"]) for line in lines)
    assert set(mats) == {f"c1|{d}" for d in per_day}
    for day, n in per_day.items():
        meta = mats[f"c1|{day}"]
        assert (meta["rows_inserted"], meta["trigger"], meta["request_id"]) == (n, "user_import", request.id)
    # No orders loaded: each line is placed on its own day, whose РНП finance is due.
    assert set(per_day) <= due_days(warehouse_conn, "c1", "rnp_finance")


def test_a_broken_row_fails_the_import_naming_the_row_and_writes_nothing(
    wb, warehouse_conn, dagster_instance, tmp_path
):
    today = today_moscow()
    lines = wb.truth.report_lines("c1", today - timedelta(days=8), today - timedelta(days=6))
    payout = [h for h, _ in PORTAL_COLUMNS].index("К перечислению Продавцу за реализованный Товар")

    def break_row(sheet_row: int, values: list) -> None:
        if sheet_row == 777:
            values[payout] = "12,34,5"

    path = write_xlsx(tmp_path / "broken.xlsx", lines, edit=break_row)
    request = request_import(warehouse_conn, dagster_instance, "c1", {"path": str(path), "format": "xlsx"})
    assert request.status == "failed"
    assert "row 777" in request.error and "К перечислению" in request.error and "12,34,5" in request.error
    assert warehouse_conn.execute("SELECT count(*) FROM wb_report_lines").fetchone()[0] == 0
    assert materializations(dagster_instance, "wb_report_lines") == {}


def test_a_file_without_the_report_fails_clearly(wb, warehouse_conn, dagster_instance, tmp_path):
    from openpyxl import Workbook

    book = Workbook()
    book.active.title = "Лист1"
    book.active.append(["Артикул", "Остаток"])
    book.active.append(["abc", 5])
    book.create_sheet("Сводка").append(["Итого", 100])
    book.save(tmp_path / "wrong.xlsx")
    (tmp_path / "corrupt.xlsx").write_bytes(b"PK\x03\x04 not really a zip")

    wrong = request_import(warehouse_conn, dagster_instance, "c1", {"path": str(tmp_path / "wrong.xlsx")})
    assert wrong.status == "failed"
    assert "no sheet of wrong.xlsx holds a realization report" in wrong.error and "'Лист1'" in wrong.error
    corrupt = request_import(warehouse_conn, dagster_instance, "c1", {"path": str(tmp_path / "corrupt.xlsx")})
    assert corrupt.status == "failed" and "corrupt.xlsx is not a readable xlsx workbook" in corrupt.error
    missing = request_import(warehouse_conn, dagster_instance, "c1", {"path": str(tmp_path / "nowhere.xlsx")})
    assert missing.status == "failed" and "does not exist" in missing.error
    # A path longer than the filesystem allows fails at once as bad input (it was an OSError, retried).
    too_long = request_import(warehouse_conn, dagster_instance, "c1", {"path": str(tmp_path / ("r" * 5000)) + ".xlsx"})
    assert too_long.status == "failed" and "cannot be read (File name too long)" in too_long.error
    assert materializations_retried(dagster_instance) == 0
    for failed in (wrong, corrupt, missing, too_long):  # a person reads the reason, not Dagster's class path
        assert failed.error.startswith("finance_report_import of cabinet c1: "), failed.error
    assert warehouse_conn.execute("SELECT count(*) FROM wb_report_lines").fetchone()[0] == 0


def test_missing_required_columns_are_named(wb, warehouse_conn, dagster_instance, tmp_path):
    today = today_moscow()
    lines = wb.truth.report_lines("c1", today - timedelta(days=7), today - timedelta(days=7))
    columns = [(h, f) for h, f in PORTAL_COLUMNS if h not in ("Srid", "Хранение")]
    path = write_xlsx(tmp_path / "cut.xlsx", lines, columns=columns)
    request = request_import(warehouse_conn, dagster_instance, "c1", {"path": str(path)})
    assert request.status == "failed"
    assert "lacks required columns" in request.error and "«Srid»" in request.error and "«Хранение»" in request.error
    assert warehouse_conn.execute("SELECT count(*) FROM wb_report_lines").fetchone()[0] == 0


def test_a_report_of_another_cabinet_is_refused_by_its_products(wb, warehouse_conn, dagster_instance, tmp_path):
    today = today_moscow()
    lines = wb.truth.report_lines("c2", today - timedelta(days=10), today - timedelta(days=9))
    path = write_xlsx(tmp_path / "c2.xlsx", lines)
    request = request_import(warehouse_conn, dagster_instance, "c1", {"path": str(path)})
    assert request.status == "failed"
    first_product_row = next(i + 2 for i, line in enumerate(lines) if line["nmId"])
    assert f"row {first_product_row}: product {lines[first_product_row - 2]['nmId']}" in request.error
    assert "is not a product of cabinet 'c1'" in request.error
    assert warehouse_conn.execute("SELECT count(*) FROM wb_report_lines").fetchone()[0] == 0
    # The same file is the other cabinet's own report.
    assert request_import(warehouse_conn, dagster_instance, "c2", {"path": str(path)}).status == "succeeded"


def test_lines_known_from_both_the_api_and_an_upload_count_once(wb, warehouse_conn, dagster_instance, tmp_path):
    today = today_moscow()
    api_first, api_last = fin.report_window()
    # An upload of the 20 days before yesterday overlaps the API's 14 days.
    upload = wb.truth.report_lines("c2", today - timedelta(days=21), today - timedelta(days=2))
    overlap = [line for line in upload if moscow_day(line["saleDt"]) >= api_first]
    path = write_csv(tmp_path / "report.csv", upload)

    # Upload first: every line is stored as uploaded.
    first = request_import(warehouse_conn, dagster_instance, "c2", {"path": str(path)})
    assert first.status == "succeeded", first.error
    # Then the API: its lines replace their uploaded twins.
    assert run_job("finance_sync", dagster_instance, "c2").success
    api = wb.truth.report_lines("c2", api_first, api_last)
    expected = lines_of_truth(api) + lines_of_truth([ln for ln in upload if moscow_day(ln["saleDt"]) < api_first])
    assert lines_in_warehouse(warehouse_conn, "c2") == expected
    by_source = dict(
        warehouse_conn.execute(
            "SELECT source, count(*) FROM wb_report_lines WHERE cabinet_id = 'c2' GROUP BY source"
        ).fetchall()
    )
    assert by_source == {"api": len(api), "user_report": len(upload) - len(overlap)}

    # The same upload again: the lines the API delivered are left out, nothing else changes.
    again = request_import(warehouse_conn, dagster_instance, "c2", {"path": str(path), "format": "csv"})
    assert again.status == "succeeded", again.error
    assert again.result["lines_known_from_wb_api"] == len(overlap)
    assert again.result["wb_report_lines"]["rows_inserted"] == 0
    assert lines_in_warehouse(warehouse_conn, "c2") == expected
    assert sums_by_day(lines_in_warehouse(warehouse_conn, "c2")) == sums_by_day(expected)


def test_a_report_is_read_from_the_upload_folder_only(wb, warehouse_conn, dagster_instance, tmp_path, monkeypatch):
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    monkeypatch.setenv("OPTIMA_UPLOAD_DIR", str(uploads))
    secret = tmp_path / "state" / "secret.key"
    secret.write_text("not for a request")
    (uploads / "inside.xlsx").symlink_to(secret)
    for path in ("/proc/self/environ", str(secret), "../state/secret.key", str(uploads / "inside.xlsx")):
        request = request_import(warehouse_conn, dagster_instance, "c1", {"path": path, "format": "xlsx"})
        assert request.status == "failed"
        assert f"report file {path!r} is not in the upload folder {uploads} (OPTIMA_UPLOAD_DIR)" in request.error
    fifo = uploads / "pipe.xlsx"
    os.mkfifo(fifo)
    request = request_import(warehouse_conn, dagster_instance, "c1", {"path": "pipe.xlsx"})
    assert request.status == "failed" and "report file 'pipe.xlsx' is not a regular file" in request.error
    assert warehouse_conn.execute("SELECT count(*) FROM wb_report_lines").fetchone()[0] == 0


@pytest.mark.parametrize(
    "cabinet, payload, reason",
    [
        ("ghost", {"path": "/tmp/r.xlsx"}, "cabinet 'ghost' does not exist"),
        ("c1", {"file": "/tmp/r.xlsx"}, "malformed payload"),
        ("c1", {"path": "/tmp/report.pdf"}, "cannot tell the format"),
        ("c1", {"path": "/tmp/r.xlsx", "format": "ods"}, "format 'ods' is not supported"),
    ],
)
def test_bad_requests_fail_at_once(wb, warehouse_conn, dagster_instance, cabinet, payload, reason):
    request_id = outbox.create_request(warehouse_conn, "import-user-report", cabinet, payload)
    result = evaluate_requests_sensor(dagster_instance)
    assert not getattr(result, "run_requests", None)
    request = outbox.get_request(warehouse_conn, request_id)
    assert request.status == "failed" and reason in request.error
