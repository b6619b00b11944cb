"""Check HTTP exchanges with the simulator against WB's own OpenAPI files (for tests; needs openapi-core).

WB's files name WB's hosts as servers; the simulator serves each category under a path prefix. A
``Contract`` therefore matches an operation by method and WB path (the URL path without the
``/{category}`` prefix) in the files of that category, and validates with openapi-core::

    contract = Contract()                       # WB's files vendored in wb_simulator/openapi/
    contract.validate(response)                 # an httpx.Response: its request and itself

``validate_request``/``validate_response`` check one side only. Errors are ``ContractError`` with
openapi-core's explanation (which field, which schema). ``response_schema`` gives one operation's
answer schema (tests/unit/test_wb_spec_models.py walks the client's models against it).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml

#: The WB OpenAPI files that describe each category's methods (``/ping`` is in 01-general).
CATEGORY_FILES: dict[str, tuple[str, ...]] = {
    "statistics": ("12-reports.yaml",),
    "finance": ("13-finances.yaml",),
    "advert": ("08-promotion.yaml",),
    "analytics": ("11-analytics.yaml", "12-reports.yaml"),
    "content": ("02-items.yaml",),
    "prices": ("02-items.yaml",),
    "feedbacks": ("09-communications.yaml",),
    "common": ("01-general.yaml", "10-rates.yaml"),
    "supplies": ("07-orders-fbw.yaml",),
}
PING_FILE = "01-general.yaml"
_HOST = "http://wb.local"


class ContractError(AssertionError):
    """An exchange that does not match WB's spec."""


#: WB's OpenAPI files, vendored unchanged (their source and date: ``openapi/README.md``).
SPEC_DIR = Path(__file__).resolve().parent / "openapi"


def find_spec_dir() -> Path:
    """``$WB_OPENAPI_DIR`` (to check against a newer copy of WB's files), else the vendored ``SPEC_DIR``."""
    env = os.environ.get("WB_OPENAPI_DIR")
    return Path(env) if env else SPEC_DIR


@dataclass
class _Request:
    host_url: str
    path: str
    method: str
    parameters: Any
    content_type: str
    body: bytes | None


@dataclass
class _Response:
    status_code: int
    content_type: str
    headers: Any
    data: bytes | None


class Contract:
    def __init__(self, spec_dir: Path | None = None):
        self.spec_dir = spec_dir or find_spec_dir()
        self._specs: dict[str, Any] = {}
        self._apis: dict[tuple[str, str], Any] = {}
        self._paths: dict[str, set[tuple[str, str]]] = {}
        self._lock = threading.Lock()

    def _api(self, filename: str, side: str = "response") -> Any:
        """openapi-core's view of one file. Responses are checked strictly: a field WB's schema does
        not have is an error. Requests tolerate unknown fields (clients may send more than WB reads)."""
        from openapi_core import Config, OpenAPI

        with self._lock:
            if filename not in self._specs:
                spec = yaml.load(
                    (self.spec_dir / filename).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
                )
                spec["paths"] = _flatten(spec["paths"], spec, ())
                # Serve every operation from one neutral host: operations are matched by WB path.
                spec["servers"] = [{"url": _HOST}]
                ops = set()
                for path, item in spec["paths"].items():
                    item.pop("servers", None)
                    for method, op in item.items():
                        if isinstance(op, dict):
                            op.pop("servers", None)
                            ops.add((method.upper(), path))
                self._specs[filename] = spec
                self._paths[filename] = ops
            key = (filename, side)
            if key not in self._apis:
                config = Config(
                    # WB's gateway errors are application/problem+json: JSON, which openapi-core
                    # does not know by that name.
                    extra_media_type_deserializers={"application/problem+json": json.loads},
                    additional_properties_default_policy="forbid" if side == "response" else "allow",
                )
                self._apis[key] = OpenAPI.from_dict(self._specs[filename], config=config)
            return self._apis[key]

    def _file_for(self, category: str, method: str, wb_path: str) -> str:
        if wb_path == "/ping":
            return PING_FILE
        for filename in CATEGORY_FILES.get(category, ()):
            self._api(filename)
            if (method, wb_path) in self._paths[filename]:
                return filename
        raise ContractError(f"{method} {category}{wb_path}: no such operation in WB's {category} spec files")

    def response_schema(self, category: str, method: str, wb_path: str, status: str = "200") -> tuple[str, Any]:
        """(file, schema) of one operation's JSON answer, ``$ref``s inlined and ``allOf`` merged."""
        filename = self._file_for(category, method, wb_path)
        self._api(filename)
        operation = self._specs[filename]["paths"][wb_path][method.lower()]
        try:
            return filename, operation["responses"][status]["content"]["application/json"]["schema"]
        except KeyError:
            raise ContractError(f"{method} {category}{wb_path}: {filename} documents no JSON {status} answer") from None

    @staticmethod
    def split(url: httpx.URL) -> tuple[str, str]:
        """(category, WB path) of a simulator URL ``{base}/{category}{wb path}``."""
        parts = urlsplit(str(url)).path.split("/", 2)
        if len(parts) < 3:
            raise ContractError(f"{url} is not a simulator URL of the form {{base}}/{{category}}/…")
        return parts[1], "/" + parts[2]

    def _openapi_request(self, request: httpx.Request) -> tuple[str, _Request]:
        from openapi_core.datatypes import RequestParameters
        from werkzeug.datastructures import Headers, ImmutableMultiDict

        category, wb_path = self.split(request.url)
        filename = self._file_for(category, request.method, wb_path)
        body = request.content if request.method in ("POST", "PATCH", "PUT") else None
        params = RequestParameters(
            query=ImmutableMultiDict(list(request.url.params.multi_items())),
            header=Headers(list(request.headers.items())),
            cookie=ImmutableMultiDict(),
        )
        content_type = request.headers.get("content-type", "application/json")
        return filename, _Request(_HOST, wb_path, request.method.lower(), params, content_type, body or None)

    def validate_request(self, request: httpx.Request) -> None:
        filename, req = self._openapi_request(request)
        try:
            self._api(filename, "request").validate_request(req)
        except Exception as exc:
            raise ContractError(
                f"{request.method} {request.url}: request does not match {filename}: {_explain(exc)}"
            ) from None

    def validate_response(self, response: httpx.Response) -> None:
        from werkzeug.datastructures import Headers

        filename, req = self._openapi_request(response.request)
        resp = _Response(
            response.status_code,
            response.headers.get("content-type", "application/json").split(";")[0],
            Headers(list(response.headers.items())),
            response.content or None,
        )
        try:
            self._api(filename, "response").validate_response(req, resp)
        except Exception as exc:
            raise ContractError(
                f"{response.request.method} {response.request.url} → {response.status_code}: response does not match "
                f"{filename}: {_explain(exc)}"
            ) from None

    def validate(self, response: httpx.Response) -> None:
        self.validate_request(response.request)
        self.validate_response(response)


def _flatten(node: Any, spec: dict[str, Any], seen: tuple[str, ...]) -> Any:
    """Inline ``$ref`` and merge ``allOf`` parts into one schema.

    WB writes most objects as ``allOf: [{type: object}, {properties: …}]``; under a strict
    "no unknown fields" policy each part would reject the other's properties, so the parts are merged
    (properties and required lists joined), which means the same for these schemas.
    """
    if isinstance(node, list):
        return [_flatten(v, spec, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        if ref in seen:
            return node
        target: Any = spec
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        return _flatten(target, spec, (*seen, ref))
    out = {k: _flatten(v, spec, seen) for k, v in node.items() if k != "allOf"}
    for part in (_flatten(p, spec, seen) for p in node.get("allOf", ())):
        if not isinstance(part, dict):
            continue
        for k, v in part.items():
            if k == "properties":
                out.setdefault("properties", {}).update(v)
            elif k == "required":
                out["required"] = sorted({*out.get("required", []), *v})
            else:
                out.setdefault(k, v)
    return out


def _explain(exc: BaseException) -> str:
    """openapi-core's schema errors (field path and message) when it has them, else its message."""
    found = []
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        for sub in getattr(e, "schema_errors", None) or ():
            path = "/".join(str(p) for p in getattr(sub, "absolute_path", []))
            found.append(f"at {path or '(root)'}: {getattr(sub, 'message', sub)}"[:300])
        todo.extend([e.__cause__, e.__context__])
    text = f"{type(exc).__name__}: {exc}"
    return "; ".join(found) if found else (text if len(text) < 600 else text[:600] + "…")
