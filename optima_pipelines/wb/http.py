"""One request to WB, done right: rate limit first, explicit timeouts, bounded retries, strict parsing.

``Transport.call`` is the only place that sends anything. Per attempt it asks the rate limiter for a
slot (sleeping a short wait, raising ``WbDeferred`` before sending when the wait is long), sends
with the cabinet's token, and sorts the outcome:

- 2xx: decoded straight from bytes into the endpoint's typed model; anything malformed raises
  ``WbResponseError`` naming the field; an unexpected 204 too.
- 401/403: ``WbAuthError``, never retried.
- 429: WB's ``X-Ratelimit-Retry`` (else ``X-Ratelimit-Reset``) becomes a pause in the limiter,
  persisted, so the retry, and any later run of the cabinet, waits for it (or defers).
- 5xx and network errors: reads retry with exponential backoff and full jitter, bounded in
  attempts and total time (tenacity). A write is resent only when it demonstrably did not reach
  WB (connection refused, 429) or after a check of WB's state says it did not take effect;
  idempotent writes (WB deduplicates identical price tasks) may be resent as they are.
- other 4xx: ``WbRequestError`` with WB's own explanation.

Every 2xx answer to a read is handed to the landing (``Lander``, landing/store.py) before anyone
decodes it, with the request that got it (never a header: never the token); a landing that fails
raises, and the answer is not returned.

The token lives in a private ``httpx.Auth`` and is never formatted into anything else.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, Protocol, TypeVar

import httpx
import msgspec
import tenacity

from optima_pipelines.timeutil import now_moscow
from optima_pipelines.wb.config import WbConfig
from optima_pipelines.wb.errors import WbAuthError, WbError, WbRequestError, WbResponseError, WbUnavailable
from optima_pipelines.wb.limiter import RateLimiter
from optima_pipelines.wb.limits import TOKEN_TYPES, LimitRule, rule_for
from optima_pipelines.wb.screening import Screening, decode_rows

log = logging.getLogger("optima_pipelines.wb")

T = TypeVar("T")

#: A JWT (WB's tokens) or any other header-safe token: visible ASCII only, so that no
#: library ever has to report an illegal header value (with the value in the message).
_TOKEN_RE = re.compile(r"^[!-~]{16,8192}$")


class Lander(Protocol):
    """Where the answers WB sent are kept as they came (landing/store.py ``Landing``)."""

    def land(
        self,
        cabinet_id: str,
        *,
        method: str,
        category: str,
        path: str,
        limit_group: str,
        params: dict[str, Any] | None,
        request_body: bytes | None,
        status: int,
        answer: bytes,
        received_at: datetime,
    ) -> None: ...


@dataclass(frozen=True)
class Endpoint:
    method: str
    category: str
    path: str
    group: str
    write: bool = False

    def __str__(self) -> str:
        return f"{self.method} {self.category} {self.path}"


class _Outcome(Exception):
    """An attempt that may be retried. ``sent``: whether WB may have acted on it."""

    def __init__(self, endpoint: Endpoint, description: str, *, sent: bool, rate_limited: bool = False):
        super().__init__(description)
        self.endpoint = endpoint
        self.description = description
        self.sent = sent
        self.rate_limited = rate_limited
        #: A write to check before resending: wait for WB to finish what it may still be doing.
        self.settle = False


class _TokenAuth(httpx.Auth):
    def __init__(self, token: str):
        self._header = f"Bearer {token}"
        # The token and its long parts (a JWT's payload and signature): never echoed in our texts.
        self._secrets = sorted({token, *(p for p in token.split(".") if len(p) >= 16)}, key=len, reverse=True)

    def __repr__(self) -> str:
        return "_TokenAuth(<token hidden>)"

    def auth_flow(self, request: httpx.Request):  # type: ignore[no-untyped-def]
        request.headers["Authorization"] = self._header
        yield request

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "<token>")
        return text


#: Why ``token_problem`` refuses a token (the client and `cabinets add/set-token` say the same).
TOKEN_RULE = "not a WB API token (16 to 8,192 visible ASCII characters: no spaces, control or non-ASCII characters)"


def token_problem(token: str) -> str | None:
    """None for a token that can be sent as given (after stripping the ends), else why not. The one
    rule for tokens: the client applies it before a request, `cabinets add/set-token` on input."""
    return None if _TOKEN_RE.match((token or "").strip()) else TOKEN_RULE


def check_token(cabinet_id: str, token: str) -> str:
    problem = token_problem(token)
    if problem is not None:
        raise WbAuthError(
            cabinet_id=cabinet_id,
            endpoint="(no request sent)",
            status=None,
            detail=f"the stored token is {problem}",
        )
    return token.strip()


def token_type_of(token: str) -> str | None:
    """The token type from a WB JWT's payload (``acc``: 1 base, 2 test, 3 personal, 4 service);
    None when the token is not a readable JWT. The signature is not checked: WB does that."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    acc = payload.get("acc") if isinstance(payload, dict) else None
    return {1: "base", 2: "test", 3: "personal", 4: "service"}.get(acc) if isinstance(acc, int) else None


def _field_path(message: str) -> tuple[str, str | None]:
    """msgspec's "Expected `int`, got `str` - at `$[3].nmId`" → (problem, "$[3].nmId")."""
    problem, sep, where = message.rpartition(" - at `")
    if not sep:
        return message, None
    path = where.rstrip("`")
    missing = re.match(r"Object missing required field `([^`]+)`", problem)
    if missing:
        return f"required field {missing.group(1)!r} is missing", f"{path}.{missing.group(1)}"
    return problem, path


def _detail(response: httpx.Response) -> str:
    """WB's explanation from an error body, whatever the service's shape (wb-api.md §1.4)."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(body, dict):
        for key in ("detail", "errorText", "message", "error", "title"):
            value = body.get(key)
            if isinstance(value, str) and value:
                return value[:300]
        errors = body.get("errors")
        if errors:
            return str(errors)[:300]
    return str(body)[:300]


#: The longest pause a 429 header can impose: a larger one (10^12 s, inf) would be a date no clock
#: can hold; WB's own penalties are minutes to hours.
MAX_PAUSE_SECONDS = 86400.0


def _header_seconds(response: httpx.Response, name: str) -> float | None:
    raw = response.headers.get(name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return min(value, MAX_PAUSE_SECONDS) if value >= 0 else None  # NaN compares false: None


_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


@cache
def _tls() -> ssl.SSLContext:
    """One TLS context (WB's certificates checked against certifi's CAs, as httpx does) for every
    client of the process: building it reads the CA bundle, which took half the CPU of a sweep that
    opened a client per cabinet. An SSLContext is safe to share between threads."""
    return httpx.create_ssl_context()


class Transport:
    """The HTTP side of one WbClient: one connection pool, the limiter, the retry policy."""

    def __init__(
        self,
        cabinet_id: str,
        token: str,
        *,
        config: WbConfig,
        limiter: RateLimiter,
        token_type: str,
        sleep: Callable[[float], None] = time.sleep,
        event_hooks: dict[str, list[Callable[..., Any]]] | None = None,
        landing: Lander | None = None,
        now: Callable[[], datetime] = now_moscow,
    ):
        if token_type not in TOKEN_TYPES:
            raise ValueError(f"unknown WB token type {token_type!r}: expected one of {', '.join(TOKEN_TYPES)}")
        self.cabinet_id = cabinet_id
        self.config = config
        self.limiter = limiter
        self.token_type = token_type
        self._sleep = sleep
        self.landing = landing
        #: When WB's last answer came (a replay's transport: when the landed one came).
        self.answered_at: datetime | None = None
        #: The clock rows "from the future" are judged by (wb.screening).
        self._now = now
        self._auth = _TokenAuth(check_token(cabinet_id, token))
        self._http = httpx.Client(
            auth=self._auth,
            verify=_tls(),
            timeout=httpx.Timeout(config.read_timeout, connect=config.connect_timeout),
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=4),
            headers={"User-Agent": config.user_agent, "Accept": "application/json"},
            follow_redirects=False,
            event_hooks=event_hooks,
        )

    def close(self) -> None:
        self._http.close()

    def _detail(self, response: httpx.Response) -> str:
        """WB's explanation, with anything that looks like our token taken out (WB's gateway texts
        quote what they could not parse)."""
        return self._auth.redact(_detail(response))

    def rule(self, endpoint: Endpoint) -> LimitRule:
        rule = rule_for(endpoint.group, self.token_type)
        if rule is None:
            raise WbRequestError(
                cabinet_id=self.cabinet_id,
                endpoint=str(endpoint),
                status=None,
                detail=f"WB does not allow a {self.token_type} token to call this method",
            )
        return rule.scaled(self.config.time_scale)

    # -- one attempt ------------------------------------------------------------------------

    def _send(self, endpoint: Endpoint, params: dict[str, Any] | None, body: bytes | None) -> httpx.Response:
        rule = self.rule(endpoint)
        self.limiter.acquire(
            self.cabinet_id, endpoint.group, rule, max_wait=self.config.max_wait_seconds, endpoint=str(endpoint)
        )
        headers = {"Content-Type": "application/json"} if body is not None else None
        started = time.monotonic()
        try:
            response = self._http.request(
                endpoint.method,
                self.config.url(endpoint.category, endpoint.path),
                params=params,
                content=body,
                headers=headers,
            )
        except _NOT_SENT as exc:
            raise _Outcome(endpoint, f"cannot connect ({exc.__class__.__name__})", sent=False) from None
        except httpx.TransportError as exc:
            raise _Outcome(endpoint, f"network error ({exc.__class__.__name__})", sent=True) from None
        elapsed = time.monotonic() - started
        log.debug(
            "WB %s for cabinet %s: HTTP %s in %.2f s, %d bytes",
            endpoint,
            self.cabinet_id,
            response.status_code,
            elapsed,
            len(response.content),
        )
        status = response.status_code
        if status in (401, 403):
            raise WbAuthError(
                cabinet_id=self.cabinet_id, endpoint=str(endpoint), status=status, detail=self._detail(response)
            )
        if status == 429:
            retry = _header_seconds(response, "X-Ratelimit-Retry")
            if retry is None:
                retry = _header_seconds(response, "X-Ratelimit-Reset")
            if retry is not None:
                seconds = retry / self.config.time_scale
                self.limiter.record_pause(
                    self.cabinet_id,
                    endpoint.group,
                    rule,
                    seconds,
                    f"WB answered 429 to {endpoint} with a {retry:g} s pause",
                )
            raise _Outcome(endpoint, f"HTTP 429 ({self._detail(response)})", sent=False, rate_limited=retry is not None)
        if status >= 500:
            raise _Outcome(endpoint, f"HTTP {status}", sent=True)
        if status >= 400:
            raise WbRequestError(
                cabinet_id=self.cabinet_id, endpoint=str(endpoint), status=status, detail=self._detail(response)
            )
        if status >= 300:
            where = response.headers.get("Location", "nowhere")
            raise WbRequestError(
                cabinet_id=self.cabinet_id,
                endpoint=str(endpoint),
                status=status,
                detail=f"unexpected redirect to {self._auth.redact(where)}: check the configured WB base URL",
            )
        remaining = response.headers.get("X-Ratelimit-Remaining")
        if remaining is not None and remaining.isdigit():
            self.limiter.observe_remaining(self.cabinet_id, endpoint.group, rule, int(remaining))
        return response

    # -- retries ----------------------------------------------------------------------------

    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Outcome) and exc.rate_limited:
            return 0.0  # the limiter holds the pause WB asked for: the next acquire waits or defers
        backoff = tenacity.wait_random_exponential(
            multiplier=self.config.backoff_base_seconds, max=self.config.backoff_max_seconds
        )(state)
        if isinstance(exc, _Outcome) and exc.settle:
            return max(backoff, self.config.write_settle_seconds)
        return backoff

    def _before_sleep(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            "WB %s for cabinet %s failed (%s), attempt %d of %d; retrying",
            exc.endpoint if isinstance(exc, _Outcome) else "request",
            self.cabinet_id,
            exc,
            state.attempt_number,
            self.config.max_attempts,
        )

    def call(
        self,
        endpoint: Endpoint,
        *,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        idempotent: bool | None = None,
        verify: Callable[[], bool] | None = None,
    ) -> httpx.Response | None:
        """Send with retries; returns the 2xx response.

        Reads are retried on any transient failure. A write (``endpoint.write``) is resent after a
        failure only when it was not sent (connect error, 429), when ``idempotent``, or when
        ``verify()`` (a read of WB's state) says it did not take effect. When ``verify()`` says it
        did, the call returns None: applied, but no response to show. When nothing can tell, the
        failure is ``WbUnavailable`` with ``outcome_unknown``.
        """
        body = msgspec.json.encode(json_body) if json_body is not None else None
        resend_ok = not endpoint.write if idempotent is None else idempotent
        attempts = 0
        # A write WB may have acted on: after a settling pause, WB's state is checked before resending.
        unsettled: _Outcome | None = None
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.config.max_attempts)
            | tenacity.stop_after_delay(self.config.retry_budget_seconds),
            wait=self._wait,
            retry=tenacity.retry_if_exception_type(_Outcome),
            sleep=self._sleep,
            before_sleep=self._before_sleep,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    if unsettled is not None and verify is not None:
                        if self._took_effect(endpoint, unsettled, attempts, verify):
                            return None
                        unsettled = None
                    attempts += 1
                    try:
                        response = self._send(endpoint, params, body)
                    except _Outcome as outcome:
                        if outcome.sent and not resend_ok:
                            if verify is None:
                                raise self._unknown(endpoint, outcome, attempts) from None
                            outcome.settle = True
                            unsettled = outcome
                        raise
                    self.answered_at = datetime.now(UTC)
                    if self.landing is not None and not endpoint.write:
                        self.landing.land(
                            self.cabinet_id,
                            method=endpoint.method,
                            category=endpoint.category,
                            path=endpoint.path,
                            limit_group=endpoint.group,
                            params=params,
                            request_body=body,
                            status=response.status_code,
                            answer=response.content,
                            received_at=self.answered_at,
                        )
                    return response
        except _Outcome as outcome:
            if unsettled is not None:
                raise self._unknown(endpoint, outcome, attempts) from None
            raise WbUnavailable(
                cabinet_id=self.cabinet_id, endpoint=str(endpoint), attempts=attempts, last_error=outcome.description
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _unknown(self, endpoint: Endpoint, outcome: _Outcome, attempts: int) -> WbUnavailable:
        return WbUnavailable(
            cabinet_id=self.cabinet_id,
            endpoint=str(endpoint),
            attempts=attempts,
            last_error=outcome.description,
            outcome_unknown=True,
        )

    def _took_effect(self, endpoint: Endpoint, outcome: _Outcome, attempts: int, verify: Callable[[], bool]) -> bool:
        """After a write that WB may have received: did it take effect? Raises when nobody can tell."""
        try:
            applied = verify()
        except WbError as exc:
            log.warning("WB %s for cabinet %s: the check after %s failed: %s", endpoint, self.cabinet_id, outcome, exc)
            raise self._unknown(endpoint, outcome, attempts) from None
        log.info(
            "WB %s for cabinet %s failed (%s); WB's state shows it %s",
            endpoint,
            self.cabinet_id,
            outcome,
            "took effect" if applied else "did not take effect: resending",
        )
        return applied

    def decode(self, endpoint: Endpoint, response: httpx.Response, model: type[T], *, empty: T | None = None) -> T:
        """Parse a 2xx body into ``model``. ``empty`` is what a 204 (or an empty body) means; without
        it a 204 is a malformed answer: WB promised content."""
        return self._decode(endpoint, response, model, empty, rows=False)[0]

    def decode_rows(
        self, endpoint: Endpoint, response: httpx.Response, model: type[T], *, empty: T | None = None
    ) -> tuple[T, Screening]:
        """Like ``decode`` for an answer that holds rows: each row is judged on its own
        (``wb.screening``): the rows refused are left out, those from the future flagged; the
        answer fails only when it is broken outside its rows."""
        return self._decode(endpoint, response, model, empty, rows=True)

    def _decode(
        self, endpoint: Endpoint, response: httpx.Response, model: type[T], empty: T | None, *, rows: bool
    ) -> tuple[T, Screening]:
        if response.status_code == 204 or not response.content:
            if empty is not None:
                return empty, Screening()
            raise WbResponseError(
                cabinet_id=self.cabinet_id,
                endpoint=str(endpoint),
                problem=f"HTTP {response.status_code} with no content where data was expected",
            )
        try:
            if rows:
                return decode_rows(
                    response.content, model, self._now(), lambda p, f: self.fail(endpoint, p, f), str(endpoint)
                )
            return msgspec.json.decode(response.content, type=model), Screening()
        except msgspec.ValidationError as exc:
            problem, field = _field_path(str(exc))
            raise WbResponseError(
                cabinet_id=self.cabinet_id, endpoint=str(endpoint), problem=problem, field=field
            ) from None
        except msgspec.DecodeError as exc:
            raise WbResponseError(
                cabinet_id=self.cabinet_id, endpoint=str(endpoint), problem=f"invalid JSON: {exc}"
            ) from None

    def fail(self, endpoint: Endpoint, problem: str, field: str | None = None) -> WbError:
        return WbResponseError(cabinet_id=self.cabinet_id, endpoint=str(endpoint), problem=problem, field=field)
