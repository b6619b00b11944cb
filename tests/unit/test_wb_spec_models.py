"""Every response model of the WB client, field by field, against WB's own OpenAPI files.

The client decodes each WB answer into a msgspec model; a field the model requires and WB leaves out
fails the whole page. So, for each endpoint the client reads, the model it decodes into is walked
along the endpoint's answer schema in WB's files (vendored in ``wb_simulator/openapi/``):

- every field the model reads exists in WB's schema at that place;
- its type agrees with WB's (and accepts null where WB says nullable);
- a field the model requires is required by WB too, or is one of the model's ``KEYS``: the few
  fields a sync cannot do without, each with its reason (their absence fails the page, naming the
  endpoint and the field: see ``test_wb_models.py``).

``WB_OPENAPI_DIR=<folder of newer WB files>`` runs the same walk against a newer copy of the spec.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import msgspec
import pytest
from msgspec import inspect as mi

from optima_pipelines.sync import ads, catalog, news
from optima_pipelines.wb import client as c
from optima_pipelines.wb.http import Endpoint
from optima_pipelines.wb.models import (
    advertising,
    analytics,
    base,
    common,
    content,
    feedbacks,
    finance,
    prices,
    statistics,
)
from wb_simulator.contract import SPEC_DIR, Contract

PING = Endpoint("GET", "common", "/ping", "common.ping")
#: The models of every WB API section.
SECTIONS = (statistics, finance, advertising, analytics, content, prices, feedbacks, common)
MODELS = {v for s in SECTIONS for v in vars(s).values() if isinstance(v, type) and issubclass(v, msgspec.Struct)}

#: Each endpoint the client reads, and the type it decodes WB's answer (HTTP 200) into.
ANSWERS: list[tuple[Endpoint, Any]] = [
    (c.ORDERS, list[statistics.Order]),
    (c.SALES, list[statistics.Sale]),
    (c.REPORT, list[finance.ReportLine]),
    (c.PROMOTION_COUNT, advertising.PromotionCount),
    (c.ADVERTS, advertising._AdvertsResponse),
    (c.FULLSTATS, list[advertising._StatsCampaign]),
    (c.BIDS, advertising._BidsResponse),
    (c.MIN_BIDS, advertising._MinBidsResponse),
    (c.FUNNEL_PRODUCTS, analytics._FunnelProductsResponse),
    (c.STOCKS, analytics._StocksResponse),
    (c.CARDS, content._CardsResponse),
    (c.PRICES, prices._GoodsResponse),
    (c.UPLOAD_PRICES, prices._UploadResponse),
    (c.PRICE_TASK, prices._TaskResponse),
    (c.PRICE_TASK_GOODS, prices._HistoryGoodsResponse),
    (c.PRICE_BUFFER_TASK, prices._TaskResponse),
    (c.FEEDBACKS, feedbacks._FeedbacksResponse),
    (c.FEEDBACK, feedbacks._FeedbackResponse),
    (c.QUESTIONS, feedbacks._QuestionsResponse),
    (c.QUESTION, feedbacks._QuestionResponse),
    (c.ANSWER_QUESTION, feedbacks._EnvelopeResponse),
    (c.ACCEPTANCE, list[common.AcceptanceCoefficient]),
    (c.NEWS, common._NewsResponse),
    (PING, common.Ping),
]
#: Endpoints whose answer the client does not decode (WB answers 204 No Content).
NO_BODY = {c.ANSWER_FEEDBACK}
#: Structs the client builds itself (requests, and rows assembled from decoded answers): not WB's shapes.
BUILT_HERE = {
    base.Row,
    advertising.CampaignRef,
    advertising.AdStat,
    advertising.BidUpdate,
    analytics.FunnelDay,
    content.CardsCursor,
    prices.PriceUpdate,
    prices.PriceTaskResult,
}

#: WB's JSON types that each of our field types decodes from.
JSON_TYPES: dict[type, tuple[str, ...]] = {
    mi.IntType: ("integer",),
    mi.StrType: ("string",),
    mi.BoolType: ("boolean",),
    # Money and percentages: JSON numbers (statistics, ads, funnel) or strings (finance).
    mi.DecimalType: ("number", "integer", "string"),
    mi.DateTimeType: ("string",),
    mi.DateType: ("string",),
}
FORMATS: dict[type, tuple[str | None, ...]] = {
    mi.DateTimeType: (None, "date-time"),
    mi.DateType: (None, "date"),
}


def _accepts_none(t: mi.Type) -> bool:
    return isinstance(t, mi.NoneType) or (
        isinstance(t, mi.UnionType) and any(isinstance(x, mi.NoneType) for x in t.types)
    )


def _walk(t: mi.Type, schema: dict[str, Any], where: str, problems: list[str]) -> None:
    """Append to ``problems`` each way ``t`` (a model type at JSON path ``where``) disagrees with ``schema``."""
    if schema.get("nullable") and not _accepts_none(t):
        problems.append(f"{where}: WB's schema says it may be null, the model does not accept null")
    if isinstance(t, mi.UnionType):
        others = [x for x in t.types if not isinstance(x, mi.NoneType)]
        assert len(others) == 1, f"{where}: a union the walk does not know: {t}"
        t, schema = others[0], {k: v for k, v in schema.items() if k != "nullable"}
    if isinstance(t, mi.StructType):
        properties = schema.get("properties")
        if schema.get("type") not in (None, "object") or properties is None:
            problems.append(f"{where}: the model reads an object ({t.cls.__name__}), WB's schema has {_kind(schema)}")
            return
        required = set(schema.get("required", ()))
        keys = getattr(t.cls, "KEYS", {})
        for f in t.fields:
            path = f"{where}.{f.encode_name}"
            if f.encode_name not in properties:
                problems.append(
                    f"{path}: {t.cls.__name__}.{f.name} reads a field WB's schema does not have here "
                    f"(WB's fields: {', '.join(sorted(properties))})"
                )
                continue
            if f.required and f.encode_name not in required and f.name not in keys:
                problems.append(
                    f"{path}: {t.cls.__name__}.{f.name} is required by the model but optional in WB's spec: "
                    f"give it a default (and say what the warehouse stores without it), or add it to "
                    f"{t.cls.__name__}.KEYS with the reason a sync cannot do without it"
                )
            _walk(f.type, properties[f.encode_name], path, problems)
        return
    if isinstance(t, mi.ListType):
        if schema.get("type") != "array":
            problems.append(f"{where}: the model reads a list, WB's schema has {_kind(schema)}")
            return
        _walk(t.item_type, schema.get("items", {}), f"{where}[]", problems)
        return
    expected = JSON_TYPES.get(type(t))
    if expected is None:
        problems.append(f"{where}: the walk does not know the model's type {t}")
    elif schema.get("type") not in expected:
        problems.append(f"{where}: the model reads {type(t).__name__[:-4].lower()}, WB's schema has {_kind(schema)}")
    elif type(t) in FORMATS and schema.get("format") not in FORMATS[type(t)]:
        problems.append(f"{where}: the model reads {type(t).__name__[:-4].lower()}, WB's schema has {_kind(schema)}")


def _kind(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "no type")
    return f"{kind} ({schema['format']})" if schema.get("format") else str(kind)


def _structs(t: mi.Type) -> set[type]:
    if isinstance(t, mi.StructType):
        return {t.cls}.union(*(_structs(f.type) for f in t.fields))
    if isinstance(t, mi.UnionType):
        return set().union(*(_structs(x) for x in t.types))
    if isinstance(t, mi.ListType):
        return _structs(t.item_type)
    return set()


@pytest.fixture(scope="module")
def contract() -> Contract:
    return Contract()


def drift(contract: Contract, endpoint: Endpoint, model: Any) -> list[str]:
    filename, schema = contract.response_schema(endpoint.category, endpoint.method, endpoint.path)
    problems: list[str] = []
    _walk(mi.type_info(model), schema, "$", problems)
    return [f"{endpoint} ({filename}) {p}" for p in problems]


@pytest.mark.parametrize(("endpoint", "model"), ANSWERS, ids=[str(e) for e, _ in ANSWERS])
def test_each_model_agrees_with_wbs_answer_schema(contract: Contract, endpoint: Endpoint, model: Any) -> None:
    problems = drift(contract, endpoint, model)
    assert not problems, f"{len(problems)} disagreement(s) with WB's spec:\n" + "\n".join(problems)


def test_every_endpoint_and_model_of_the_client_is_walked() -> None:
    endpoints = {v for v in vars(c).values() if isinstance(v, Endpoint)}
    walked = {e for e, _ in ANSWERS}
    assert endpoints - walked - NO_BODY == set(), "client endpoints missing from ANSWERS"
    structs = MODELS
    reached = set().union(*(_structs(mi.type_info(t)) for _, t in ANSWERS))
    assert structs - reached - BUILT_HERE == set(), "models no answer decodes into: add their endpoint to ANSWERS"


def test_keys_name_required_fields_with_a_reason() -> None:
    """A ``KEYS`` entry is a field the model really requires (else the list lies), with its reason."""
    stale = []
    for cls in MODELS:
        fields = {f.name: f for f in msgspec.structs.fields(cls)}
        for name, reason in getattr(cls, "KEYS", {}).items():
            f = fields.get(name)
            if f is None or f.default is not msgspec.NODEFAULT or f.default_factory is not msgspec.NODEFAULT:
                stale.append(f"{cls.__name__}.KEYS[{name!r}]: not a required field of {cls.__name__}")
            elif len(reason.split()) < 4:
                stale.append(f"{cls.__name__}.KEYS[{name!r}]: give the reason, not {reason!r}")
    assert not stale, "\n".join(stale)


#: A value of each of our field types, as WB would write it.
SAMPLES: dict[type, Any] = {
    mi.IntType: 7,
    mi.StrType: "S7",
    mi.BoolType: True,
    mi.DecimalType: "7.10",
    mi.DateTimeType: "2026-08-01T10:00:00",
    mi.DateType: "2026-08-01",
}


def _least(t: mi.Type, schema: dict[str, Any]) -> Any:
    """The smallest answer WB's spec allows for ``schema``: only its required fields (and the model's
    ``KEYS``, which a sync needs whatever the spec says), one item per list."""
    if isinstance(t, mi.UnionType):
        t = next(x for x in t.types if not isinstance(x, mi.NoneType))
    if isinstance(t, mi.StructType):
        required = set(schema.get("required", ()))
        keys = getattr(t.cls, "KEYS", {})
        props = schema["properties"]
        return {
            f.encode_name: _least(f.type, props[f.encode_name])
            for f in t.fields
            if f.encode_name in required or f.name in keys
        }
    if isinstance(t, mi.ListType):
        return [_least(t.item_type, schema.get("items", {}))]
    return SAMPLES[type(t)]


#: Tables laid out beside their loads (sync/): the (columns, values) of each row a decoded struct makes.
LAID_OUT: dict[type, Any] = {
    advertising.Campaign: lambda c: [
        (ads.CAMPAIGN_COLUMNS, ads.campaign_row("c1", c)),
        *((ads.PRODUCT_COLUMNS, row) for row in ads.product_rows("c1", c)),
    ],
    content.Card: lambda card: [(catalog.CARD_COLUMNS, catalog.card_row("c1", card))],
    prices.Price: lambda price: [(catalog.PRICE_COLUMNS, catalog.price_row("c1", price))],
    common.News: lambda item: [(news.COLUMNS, news.article_row(item))],
}


def _rows(value: Any) -> list[tuple[tuple[str, ...], tuple[Any, ...]]]:
    """The (columns, values) of every warehouse row the decoded structs in ``value`` make: a
    ``base.Row``'s own, or its load's (``LAID_OUT``)."""
    if isinstance(value, list):
        return [r for v in value for r in _rows(v)]
    if isinstance(value, msgspec.Struct):
        inner = [r for f in value.__struct_fields__ for r in _rows(getattr(value, f))]
        if not getattr(value, "priced", True):
            return inner  # a price without sizes is not a row (see Price)
        if isinstance(value, base.Row):
            return [(value.COLUMNS, value.copy_row()), *inner]
        return [*LAID_OUT.get(type(value), lambda _: [])(value), *inner]
    return []


@pytest.mark.parametrize(("endpoint", "model"), ANSWERS, ids=[str(e) for e, _ in ANSWERS])
def test_an_answer_without_any_optional_field_decodes_into_rows(
    contract: Contract, endpoint: Endpoint, model: Any
) -> None:
    """What WB may send per its spec (every optional field left out) decodes, and its rows are whole."""
    _, schema = contract.response_schema(endpoint.category, endpoint.method, endpoint.path)
    answer = msgspec.json.encode(_least(mi.type_info(model), schema))
    decoded = msgspec.json.decode(answer, type=model)
    for columns, values in _rows(decoded):
        assert len(values) == len(columns)


def test_the_vendored_spec_is_wbs_files_unchanged() -> None:
    """The walk is only as good as the files: they stay WB's, byte for byte (``openapi/SHA256SUMS``)."""
    sums = {
        name: digest for digest, name in (line.split() for line in (SPEC_DIR / "SHA256SUMS").read_text().splitlines())
    }
    assert sorted(sums) == sorted(p.name for p in SPEC_DIR.glob("*.yaml"))
    changed = [n for n, digest in sums.items() if hashlib.sha256((SPEC_DIR / n).read_bytes()).hexdigest() != digest]
    assert not changed, (
        f"{changed} differ from WB's published files: replace them with a newer copy from WB, never edit"
    )


def test_the_walk_reports_a_drift_clearly(contract: Contract) -> None:
    """The walk's message names the endpoint, the file, the JSON path, the model's field and what to do."""

    class Drifted(msgspec.Struct, rename="camel"):
        srid: str
        is_cancel: bool
        total_price: int
        nope: str | None = None

    problems = drift(contract, c.ORDERS, list[Drifted])
    assert problems == [
        "GET statistics /api/v1/supplier/orders (12-reports.yaml) $[].srid: Drifted.srid is required by the model "
        "but optional in WB's spec: give it a default (and say what the warehouse stores without it), or add it "
        "to Drifted.KEYS with the reason a sync cannot do without it",
        "GET statistics /api/v1/supplier/orders (12-reports.yaml) $[].isCancel: Drifted.is_cancel is required by "
        "the model but optional in WB's spec: give it a default (and say what the warehouse stores without it), or "
        "add it to Drifted.KEYS with the reason a sync cannot do without it",
        "GET statistics /api/v1/supplier/orders (12-reports.yaml) $[].totalPrice: Drifted.total_price is required "
        "by the model but optional in WB's spec: give it a default (and say what the warehouse stores without it), "
        "or add it to Drifted.KEYS with the reason a sync cannot do without it",
        "GET statistics /api/v1/supplier/orders (12-reports.yaml) $[].totalPrice: the model reads int, WB's schema "
        "has number",
        "GET statistics /api/v1/supplier/orders (12-reports.yaml) $[].nope: Drifted.nope reads a field WB's schema "
        "does not have here (WB's fields: " + ", ".join(sorted(_order_fields(contract))) + ")",
    ]


def _order_fields(contract: Contract) -> set[str]:
    _, schema = contract.response_schema("statistics", "GET", "/api/v1/supplier/orders")
    return set(schema["items"]["properties"])


if __name__ == "__main__":  # python -m tests.unit.test_wb_spec_models: every disagreement, one a line
    spec = Contract()
    found = [p for e, t in ANSWERS for p in drift(spec, e, t)]
    print("\n".join(found) or "no disagreement")
    sys.exit(1 if found else 0)
