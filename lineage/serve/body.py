"""Reading a request body: content type, gzip or plain, one size limit before and after decompression.

The limit is ``kafka.max_message_bytes``: a body (for the batch endpoint, the whole array) larger than one
Kafka message may be is refused with 413, whether it arrives plain or gzip-compressed. Decompression stops
as soon as the output passes the limit, so a small gzip bomb costs no more than one limit of memory. The
whole body must arrive within ``serve.body_timeout_seconds`` (a slow sender is answered 408 and dropped).
"""

from __future__ import annotations

import asyncio
import zlib

from aiohttp import web

from lineage.serve.errors import (
    BODY_TIMEOUT,
    INVALID_GZIP,
    PAYLOAD_TOO_LARGE,
    UNSUPPORTED_CONTENT_ENCODING,
    UNSUPPORTED_MEDIA_TYPE,
    ApiError,
)

JSON_TYPE = "application/json"
GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip header and trailer, not raw deflate or zlib


def check_content_type(request: web.Request) -> None:
    """``application/json``, with no charset or ``charset=utf-8`` (what OpenLineage clients send)."""
    charset = (request.charset or "utf-8").lower().replace("_", "-")
    if request.content_type.lower() != JSON_TYPE or charset not in ("utf-8", "utf8"):
        given = request.headers.get("Content-Type", "none")
        raise ApiError(415, UNSUPPORTED_MEDIA_TYPE, f"Content-Type must be {JSON_TYPE}, got {given[:100]}")


def _too_large(limit: int, what: str) -> ApiError:
    return ApiError(413, PAYLOAD_TOO_LARGE, f"{what} is larger than {limit} bytes", close=True)


class _Gunzip:
    """Streaming gzip decoding (several members too) with a bound on the output."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._decoder = zlib.decompressobj(GZIP_WBITS)
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, data: bytes) -> None:
        while data:
            if self._decoder.eof:  # the next member of a multi-member file
                self._decoder = zlib.decompressobj(GZIP_WBITS)
            try:
                out = self._decoder.decompress(data, self._limit - self._size + 1)
            except zlib.error as exc:
                raise ApiError(400, INVALID_GZIP, f"the body is not valid gzip: {exc}", close=True) from None
            self._size += len(out)
            if self._size > self._limit:
                raise _too_large(self._limit, "the decompressed body")
            self._parts.append(out)
            data = self._decoder.unconsumed_tail or (self._decoder.unused_data if self._decoder.eof else b"")

    def finish(self) -> bytes:
        if not self._decoder.eof:
            raise ApiError(400, INVALID_GZIP, "the gzip body is truncated")
        return b"".join(self._parts)


async def read_body(request: web.Request, *, limit: int, timeout_s: float) -> tuple[bytes, int]:
    """The body after decompression and its size on the wire; raises :class:`ApiError`."""
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip", "x-gzip"):
        raise ApiError(
            415, UNSUPPORTED_CONTENT_ENCODING, f"Content-Encoding must be gzip or none, got {encoding[:50]}"
        )
    length = request.content_length
    if length is not None and length > limit:
        raise _too_large(limit, "the body")
    gunzip = _Gunzip(limit) if encoding != "identity" else None
    parts: list[bytes] = []
    received = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.content.iter_any():
                received += len(chunk)
                if received > limit:
                    raise _too_large(limit, "the body")
                if gunzip is not None:
                    gunzip.feed(chunk)
                else:
                    parts.append(chunk)
    except TimeoutError:
        raise ApiError(
            408, BODY_TIMEOUT, f"the body did not arrive within {timeout_s:g} s", close=True
        ) from None
    if gunzip is not None:
        return gunzip.finish(), received
    return (parts[0] if len(parts) == 1 else b"".join(parts)), received
