"""``lineage --api URL``: the query commands asked of a running ``lineage serve`` instead of the lake.

The read API's ``/api/v2/...`` answers are the CLI's ``--json`` documents (docs/read-api.md), so a command
sends its options as query parameters and prints the answer with the same printers. What that buys: no
catalog settings or object-store credentials on the asking machine (an API key instead, from
``LINEAGE_API_KEY``), and none of the lake readers' start-up (pydantic settings, pyiceberg, pyarrow): the
process imports the standard library's HTTP client and the printers only.

Errors keep the CLI's exits: the service's 4xx (an unknown node, a bad option, a refused key) is exit 2
with its message; an unreachable service, a timeout or a 5xx is exit 1.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from lineage.query.errors import LookupError_, UnknownNode

KEY_ENV = "LINEAGE_API_KEY"  # Authorization: Bearer <key>; never an option (a command line is visible)
TIMEOUT_S = 300.0  # the service's own limits answer long before; this only ends a hung connection

Params = Mapping[str, Any]


class Unreachable(Exception):
    """The service could not be asked or failed to answer (exit 1, as a failed send)."""


class RemoteAnswers:
    """GETs of one read API; ``base`` is the service's root URL (``http://host:5000``)."""

    def __init__(self, base: str, key: str | None = None, timeout_s: float = TIMEOUT_S) -> None:
        parsed = urllib.parse.urlsplit(base)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise LookupError_(f"--api must be an http(s) URL such as http://127.0.0.1:5000, got {base!r}")
        self.base = base.rstrip("/")
        self.key = key if key is not None else os.environ.get(KEY_ENV) or None
        self.timeout_s = timeout_s

    def url(self, path: str, params: Params) -> str:
        query = urllib.parse.urlencode(list(_pairs(params)))
        return f"{self.base}{path}" + (f"?{query}" if query else "")

    def text(self, path: str, params: Params) -> str:
        """The body of ``GET path?params`` as text (a JSON document or a page)."""
        request = urllib.request.Request(self.url(path, params), headers=self._headers())
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            raise _refusal(exc, sent_key=bool(self.key)) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise Unreachable(f"cannot ask the read API at {self.base}: {reason}") from None

    def json(self, path: str, params: Params) -> Any:
        """The JSON answer of ``GET path?params``."""
        body = self.text(path, params)
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            raise Unreachable(f"the read API at {self.base} answered {path} with no JSON") from None

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/html;q=0.9, */*;q=0.1"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        return headers


def _pairs(params: Params) -> Iterable[tuple[str, str]]:
    """Query pairs: None left out, booleans as ``true``/``false``, times as ISO-8601 UTC, lists repeated."""
    for name, value in params.items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if item is None:
                continue
            if isinstance(item, bool):
                yield name, "true" if item else "false"
            elif isinstance(item, datetime):
                yield name, item.astimezone(UTC).isoformat().replace("+00:00", "Z")
            else:
                yield name, str(item)


def _refusal(exc: urllib.error.HTTPError, sent_key: bool) -> Exception:
    """The service's error as the CLI's: a 4xx is a question that cannot be answered (its message, as the
    lake-reading CLI says it), anything else a failure to ask. ``sent_key``: the request carried a key."""
    try:
        error = orjson.loads(exc.read() or b"{}").get("error") or {}
    except (orjson.JSONDecodeError, AttributeError, OSError):
        error = {}
    message = error.get("message") if isinstance(error, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    if exc.code == 404 and message:
        return UnknownNode(message, error.get("suggestions") or [])
    if exc.code in (401, 403):
        hint = "the API key was refused" if sent_key else f"no API key sent: set {KEY_ENV}"
        return LookupError_(f"the read API refused the request: {exc.code} {code or exc.reason} ({hint})")
    if 400 <= exc.code < 500:
        return LookupError_(message or f"the read API answered {exc.code} {code or exc.reason}")
    said = f": {message}" if message else ""
    return Unreachable(f"the read API failed: {exc.code} {code or exc.reason}{said}")
