"""WB-style API tokens: JWTs the simulator issues per cabinet and checks on every request (wb-api.md §11).

Payload fields as WB's: ``acc`` (token type: 1 Base, 2 Test, 3 Personal, 4 Service), ``for``
(``self`` / ``asid:…``), ``t`` (test), ``s`` (category bitmask, bit N meaning ``1 << N``), ``sid``
(the seller's UUID), ``id`` (the token's UUID), ``exp`` (Unix seconds, 180 days by default). The
signature is an HMAC of the simulator's own secret, so a token the simulator did not issue (or one
edited by hand) is "malformed", exactly as WB treats a token it cannot verify.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import uuid
from dataclasses import dataclass

#: Category (the simulator's path prefix) → bit of the ``s`` mask. ``common`` needs no bit: its
#: methods accept a token of any category (x-category: commonapi).
CATEGORY_BITS: dict[str, int] = {
    "content": 1,
    "analytics": 2,
    "prices": 3,
    "statistics": 5,
    "advert": 6,
    "feedbacks": 7,
    "supplies": 10,
    "finance": 13,
}
READ_ONLY_BIT = 30
TOKEN_TYPES: dict[str, int] = {"base": 1, "test": 2, "personal": 3, "service": 4}
_ACC_TO_TYPE = {v: k for k, v in TOKEN_TYPES.items()}
TOKEN_LIFETIME_SECONDS = 180 * 86400


class TokenRejected(Exception):
    """The gateway's 401: ``detail`` is WB's text."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    cabinet_id: str
    sid: str
    token_type: str
    categories: frozenset[str]
    read_only: bool
    exp: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenAuthority:
    """Issues tokens and resolves an ``Authorization`` header to the cabinet it belongs to."""

    def __init__(self, secret: bytes):
        self._secret = secret
        self._lock = threading.Lock()
        self._issued: dict[str, str] = {}  # token id → cabinet id
        self._revoked: set[str] = set()
        self._counter = 0

    def issue(
        self,
        cabinet_id: str,
        sid: str,
        *,
        categories: list[str] | tuple[str, ...] | frozenset[str] | None,
        token_type: str,
        exp: int,
        read_only: bool = False,
    ) -> str:
        if token_type not in TOKEN_TYPES:
            raise ValueError(f"token_type must be one of {sorted(TOKEN_TYPES)}, got {token_type!r}")
        cats = set(CATEGORY_BITS) if categories is None else set(categories)
        unknown = cats - set(CATEGORY_BITS) - {"common"}
        if unknown:
            raise ValueError(f"unknown WB categories {sorted(unknown)}; known: {sorted(CATEGORY_BITS)}")
        mask = 0
        for cat in cats - {"common"}:
            mask |= 1 << CATEGORY_BITS[cat]
        if read_only:
            mask |= 1 << READ_ONLY_BIT
        with self._lock:
            self._counter += 1
            # Deterministic per simulator secret and issue order: the same test gets the same tokens.
            token_id = str(
                uuid.UUID(bytes=hashlib.sha256(self._secret + str(self._counter).encode()).digest()[:16], version=4)
            )
            self._issued[token_id] = cabinet_id
        payload: dict[str, object] = {
            "acc": TOKEN_TYPES[token_type],
            "ent": 1,
            "exp": exp,
            "id": token_id,
            "iid": 10_000_000 + self._counter,
            "oid": 1_000_000,
            "s": mask,
            "sid": sid,
            "t": token_type == "test",
            "uid": 20_000_000 + self._counter,
        }
        if token_type == "personal":
            payload["for"] = "self"
        elif token_type == "service":
            payload["for"] = "asid:optima-sim"
        header = _b64(json.dumps({"alg": "HS256", "kid": "wb-sim", "typ": "JWT"}, separators=(",", ":")).encode())
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return f"{header}.{body}.{self._sign(header, body)}"

    def _sign(self, header: str, body: str) -> str:
        return _b64(hmac.new(self._secret, f"{header}.{body}".encode(), hashlib.sha256).digest())

    def revoke(self, token: str) -> None:
        info = self.inspect(token, now=None)
        with self._lock:
            self._revoked.add(info.token_id)

    def inspect(self, token: str, *, now: float | None) -> TokenInfo:
        """Decode and verify ``token`` (bare or ``Bearer …``); raises TokenRejected with WB's detail.

        ``now`` (Unix seconds) checks expiry; None skips that check."""
        token = token.strip()
        if token.lower().startswith("bearer "):
            token = token[7:].strip()
        if not token:
            raise TokenRejected("token problem; token is malformed: empty Authorization header")
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenRejected("token problem; token is malformed: token contains an invalid number of segments")
        header, body, signature = parts
        try:
            payload = json.loads(_unb64(body))
            _unb64(signature)
        except (ValueError, UnicodeDecodeError):
            raise TokenRejected("token problem; token is malformed: could not base64 decode the token") from None
        if not hmac.compare_digest(signature, self._sign(header, body)):
            raise TokenRejected("token problem; token is malformed: signature is invalid")
        with self._lock:
            cabinet_id = self._issued.get(payload.get("id", ""))
            revoked = payload.get("id") in self._revoked
        if cabinet_id is None or revoked:
            raise TokenRejected("token problem; token is malformed: token is not valid")
        if now is not None and payload["exp"] <= now:
            raise TokenRejected("token problem; token expired")
        mask = int(payload["s"])
        return TokenInfo(
            token_id=payload["id"],
            cabinet_id=cabinet_id,
            sid=payload["sid"],
            token_type=_ACC_TO_TYPE.get(int(payload["acc"]), "personal"),
            categories=frozenset(c for c, bit in CATEGORY_BITS.items() if mask & (1 << bit)),
            read_only=bool(mask & (1 << READ_ONLY_BIT)),
            exp=int(payload["exp"]),
        )

    def authorize(self, header: str | None, category: str, *, now: float, write: bool) -> TokenInfo:
        """The token of a request to ``category``, or TokenRejected with the 401 detail WB would send."""
        info = self.inspect(header or "", now=now)
        if info.token_type == "test":
            # A sandbox token on a production host.
            raise TokenRejected("token problem; token scope not allowed")
        if category != "common" and category not in info.categories:
            raise TokenRejected("token problem; token scope not allowed")
        if write and info.read_only:
            raise TokenRejected("token problem; token scope not allowed: read-only token")
        return info
