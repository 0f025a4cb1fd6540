"""One JSON shape for every error the service answers: ``{"error": {"code": ..., "message": ...}}``.

``code`` is stable and machine-readable: the validation reasons of :mod:`lineage.events.rules` for an
invalid event, and the request-level codes below for everything else.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from aiohttp import web

log = logging.getLogger(__name__)

UNAUTHORIZED = "UNAUTHORIZED"
FORBIDDEN = "FORBIDDEN"  # a known key, not allowed this: writing, reading, or a namespace out of its scope
NOT_FOUND = "NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
UNSUPPORTED_CONTENT_ENCODING = "UNSUPPORTED_CONTENT_ENCODING"
INVALID_GZIP = "INVALID_GZIP"
PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
BODY_TIMEOUT = "BODY_TIMEOUT"
INVALID_BATCH = "INVALID_BATCH"
BATCH_TOO_LARGE = "BATCH_TOO_LARGE"
KAFKA_UNAVAILABLE = "KAFKA_UNAVAILABLE"
BATCH_INCOMPLETE = "BATCH_INCOMPLETE"
BATCH_HAS_INVALID_EVENTS = "BATCH_HAS_INVALID_EVENTS"
INTERNAL_ERROR = "INTERNAL_ERROR"
HTTP_ERROR = "HTTP_ERROR"

_HTTP_CODES = {
    401: UNAUTHORIZED,
    403: FORBIDDEN,
    404: NOT_FOUND,
    405: METHOD_NOT_ALLOWED,
    413: PAYLOAD_TOO_LARGE,
}


class ApiError(Exception):
    """Raised by handlers; the middleware answers it in the shared shape."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        close: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        self.close = close  # close the connection after answering (the rest of the body is not read)


def json_response(status: int, payload: Any, headers: Mapping[str, str] | None = None) -> web.Response:
    """``payload`` as compact UTF-8 JSON. orjson: the largest answers (thousands of nodes, megabytes) took
    19 ms in the standard library's encoder and take about 3 ms here (docs/benchmark-tuning.md)."""
    return web.Response(
        status=status,
        body=orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS),
        content_type="application/json",
        headers=headers,
    )


def error_payload(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


# A refused request's code, kept on the response for the metrics middleware.
REFUSAL_CODE = "lineage_refusal_code"


def error_response(error: ApiError) -> web.Response:
    response = json_response(error.status, error_payload(error.code, error.message), error.headers)
    response[REFUSAL_CODE] = error.code
    if error.close:
        response.force_close()
    return response


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as error:
        return error_response(error)
    except web.HTTPException as exc:  # the router's 404/405, aiohttp's own 413 ...
        if exc.status < 400:
            raise
        code = _HTTP_CODES.get(exc.status, HTTP_ERROR)
        headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
        return error_response(ApiError(exc.status, code, exc.reason, headers=headers))
    except Exception:
        # Never the body: the traceback names the handler, not what was sent.
        log.exception("unexpected error in %s %s", request.method, request.path)
        return error_response(ApiError(500, INTERNAL_ERROR, "unexpected error, see the service log"))
