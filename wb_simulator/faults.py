"""Fault injection per endpoint: server errors, throttling, latency, broken bodies.

A rule matches requests by a glob over ``"<METHOD> <category><wb path>"`` without the query, e.g.
``"GET statistics/api/v1/supplier/orders"``, ``"*supplier/orders"``, ``"statistics/*"`` (a pattern
without a method matches any method). Every rule draws from its own ``random.Random`` seeded from the
simulator's seed and the rule's position, one draw per matching request, so the same sequence of
requests meets the same faults: a storm test is reproducible.

Kinds, checked in this order on each matching request (the first that fires wins):

- ``error_rate``: a 5xx (500, 502, 503 or 504) with a short JSON body;
- ``rate_429``: a 429 with WB's gateway body and ``X-Ratelimit-*`` headers (Retry 1 s);
- ``empty_204``: 204 with no body where data was expected;
- ``truncate``: the real body cut in half (invalid JSON), status 200;
- ``malformed``: a 200 whose body is not JSON at all;
- ``wrong_types``: the real body with the first row's fields given the wrong JSON types
  (numbers as strings, strings as numbers);
- ``lost_reply``: the method runs (WB acts on it), then the answer is replaced by a 5xx, as when
  WB's gateway loses the reply of a write that was applied;
- ``envelope_error``: a 200 with WB's envelope saying the method failed, ``{"data": null,
  "error": true, "errorText": ENVELOPE_ERROR_TEXT}``; the method does not run;
- ``rewrite``: a function given the answer's body (WB's JSON as Python values) that returns the
  body to send instead, or ``bytes`` to send as they are (JSON Python cannot write: ``1e400``): WB
  serving hand-made rows (a NaN amount, a date in year 9999). Applies to every matching 200 answer
  (``times`` and ``after`` bound it); only in process, not over ``/__sim/faults``;
- ``latency_s``: added before the answer, for every matching request, or only for a
  ``latency_spike_rate`` fraction of them. A request held by a rule's latency is answered as soon
  as the rule is removed (``remove``, ``clear``), as WB answers once its slowness is over: a test
  that lifts a long latency does not wait for the calls already held.

The body kinds take ``True`` (every matching request) or a rate between 0 and 1. ``times`` bounds
how many faults the rule injects in total (latency not counted); None means no bound. ``after``
lets the first N matching requests through untouched (page 1 succeeds, page 2 fails: ``after=1``).
"""

from __future__ import annotations

import asyncio
import fnmatch
import random
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FaultRule:
    pattern: str
    error_rate: float = 0.0
    rate_429: float = 0.0
    latency_s: float = 0.0
    latency_spike_rate: float | None = None
    truncate: float = 0.0
    malformed: float = 0.0
    wrong_types: float = 0.0
    empty_204: float = 0.0
    lost_reply: float = 0.0
    envelope_error: float = 0.0
    rewrite: Callable[[Any], Any] | None = None
    times: int | None = None
    after: int = 0
    fired: int = 0
    #: Matching requests seen so far (``after`` lets the first ones through).
    seen: int = 0
    rng: random.Random = field(default_factory=random.Random, repr=False)
    #: Set when the rule is removed: the requests its latency holds are answered at once.
    lifted: threading.Event = field(default_factory=threading.Event, repr=False)

    def matches(self, method: str, target: str) -> bool:
        pattern = self.pattern
        if " " in pattern:
            want_method, pattern = pattern.split(" ", 1)
            if want_method.upper() != method.upper() and want_method != "*":
                return False
        return fnmatch.fnmatchcase(target, pattern) or fnmatch.fnmatchcase(target, pattern.lstrip("/"))


@dataclass(frozen=True)
class Fault:
    """What happens to one request: ``kind`` is None when only latency applies."""

    kind: str | None
    status: int = 200
    latency_s: float = 0.0
    #: The ``rewrite`` rule's function (kind "rewrite").
    rewrite: Callable[[Any], Any] | None = None
    #: Set when the rule that gave the latency is removed: the latency ends there.
    lifted: threading.Event | None = None


_KINDS = (
    "error_rate",
    "rate_429",
    "empty_204",
    "truncate",
    "malformed",
    "wrong_types",
    "lost_reply",
    "envelope_error",
)
#: The ``errorText`` of an injected ``envelope_error``.
ENVELOPE_ERROR_TEXT = "Внутренняя ошибка: задача не найдена"


async def hold(fault: Fault, step_s: float = 0.1) -> None:
    """Wait out the fault's latency, or less: until its rule is removed."""
    deadline = time.monotonic() + fault.latency_s
    while (left := deadline - time.monotonic()) > 0:
        if fault.lifted is not None and fault.lifted.is_set():
            return
        await asyncio.sleep(min(step_s, left))


def server_error_body(status: int) -> dict[str, Any]:
    """The JSON body of an injected 5xx."""
    return {"title": "internal server error", "detail": "service unavailable, retry later", "status": status}


def truncated(raw: bytes) -> bytes:
    """A body cut in half: invalid JSON, as when a connection drops mid-answer."""
    return raw[: max(1, len(raw) // 2)]


def _rate(value: Any, name: str) -> float:
    if value is True:
        return 1.0
    if value is False or value is None:
        return 0.0
    rate = float(value)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{name} must be a rate between 0 and 1 (or True/False), got {value!r}")
    return rate


class Faults:
    """The simulator's fault rules: ``sim.faults.set(...)``, ``sim.faults.clear()``."""

    def __init__(self, seed: int):
        self._seed = seed
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._count = 0

    def set(
        self,
        endpoint_pattern: str,
        *,
        error_rate: float = 0.0,
        rate_429: float = 0.0,
        latency_s: float = 0.0,
        latency_spike_rate: float | None = None,
        truncate: bool | float = False,
        malformed: bool | float = False,
        wrong_types: bool | float = False,
        empty_204: bool | float = False,
        lost_reply: bool | float = False,
        envelope_error: bool | float = False,
        rewrite: Callable[[Any], Any] | None = None,
        times: int | None = None,
        after: int = 0,
    ) -> FaultRule:
        """Add a rule (rules added later are checked first); returns it (``rule.fired`` counts its faults)."""
        if latency_s < 0:
            raise ValueError(f"latency_s must not be negative, got {latency_s!r}")
        if times is not None and times < 0:
            raise ValueError(f"times must be None or at least 0, got {times!r}")
        if after < 0:
            raise ValueError(f"after must be at least 0, got {after!r}")
        if rewrite is not None and not callable(rewrite):
            raise ValueError("rewrite must be a function of the answer's body (in process only)")
        with self._lock:
            self._count += 1
            rule = FaultRule(
                pattern=endpoint_pattern,
                error_rate=_rate(error_rate, "error_rate"),
                rate_429=_rate(rate_429, "rate_429"),
                latency_s=float(latency_s),
                latency_spike_rate=None
                if latency_spike_rate is None
                else _rate(latency_spike_rate, "latency_spike_rate"),
                truncate=_rate(truncate, "truncate"),
                malformed=_rate(malformed, "malformed"),
                wrong_types=_rate(wrong_types, "wrong_types"),
                empty_204=_rate(empty_204, "empty_204"),
                lost_reply=_rate(lost_reply, "lost_reply"),
                envelope_error=_rate(envelope_error, "envelope_error"),
                rewrite=rewrite,
                times=times,
                after=after,
                rng=random.Random(zlib.crc32(f"{self._seed}:fault:{self._count}".encode())),
            )
            self._rules.insert(0, rule)
            return rule

    def clear(self) -> None:
        with self._lock:
            for rule in self._rules:
                rule.lifted.set()
            self._rules.clear()

    def remove(self, rule: FaultRule) -> None:
        """Drop one rule (``set`` returned it); the others stay."""
        with self._lock:
            rule.lifted.set()
            self._rules = [r for r in self._rules if r is not rule]

    @property
    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def decide(self, method: str, target: str) -> Fault:
        """The fault (if any) for one request to ``target`` (``category/path``)."""
        latency = 0.0
        lifted: threading.Event | None = None
        with self._lock:
            for rule in self._rules:
                if not rule.matches(method, target):
                    continue
                if rule.latency_s and not latency:
                    spike = rule.latency_spike_rate
                    if spike is None or rule.rng.random() < spike:
                        latency, lifted = rule.latency_s, rule.lifted
                rule.seen += 1
                if rule.seen <= rule.after:
                    continue
                if rule.times is not None and rule.fired >= rule.times:
                    continue
                if rule.rewrite is not None:
                    rule.fired += 1
                    return Fault("rewrite", 200, latency, rule.rewrite, lifted)
                draw = rule.rng.random()
                edge = 0.0
                for kind in _KINDS:
                    edge += getattr(rule, kind)
                    if draw < edge:
                        rule.fired += 1
                        status = 200
                        if kind in ("error_rate", "lost_reply"):
                            status = rule.rng.choice((500, 502, 503, 504))
                        elif kind == "rate_429":
                            status = 429
                        if kind == "empty_204":
                            status = 204
                        return Fault(kind, status, latency, lifted=lifted)
        return Fault(None, 200, latency, lifted=lifted)
