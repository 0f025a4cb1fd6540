"""API keys: ``Authorization: Bearer <key>``, keys kept only as SHA-256 hex digests.

A presented key is hashed and compared with every configured digest in constant time
(``hmac.compare_digest``, no early exit), and a refusal never says whether the header was missing,
malformed or the key unknown.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from pathlib import Path

HASH_PATTERN = re.compile(r"[0-9a-f]{64}")


def hash_key(key: str) -> str:
    """The digest to configure for ``key`` (``lineage serve hash-key``)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    """A random key: 32 bytes, URL-safe base64, never starting with ``-`` (one in 64 would, and a
    command line would take it for an option)."""
    while (key := secrets.token_urlsafe(32)).startswith("-"):
        pass
    return key


def read_hash_file(path: Path) -> list[str]:
    """Digests from a file: one per line; blank lines and ``#`` comments are skipped."""
    digests = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.split("#", 1)[0].strip().lower()
        if not text:
            continue
        if not HASH_PATTERN.fullmatch(text):
            raise ValueError(f"{path}:{number}: not a SHA-256 hex digest")
        digests.append(text)
    return digests


class ApiKeys:
    """The configured digests; with none, every request is let through (the service is loopback only)."""

    def __init__(self, digests: Iterable[str]) -> None:
        self._digests = tuple(bytes.fromhex(d) for d in dict.fromkeys(d.lower() for d in digests))

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def allows(self, authorization: str | None) -> bool:
        if not self._digests:
            return True
        scheme, _, key = (authorization or "").partition(" ")
        # aiohttp keeps a header's non-UTF-8 bytes as lone surrogates; "surrogatepass" encodes them to bytes
        # that are never valid UTF-8, so such a key hashes to no configured key's digest (a 401, not a 500).
        presented = hashlib.sha256(key.strip().encode("utf-8", "surrogatepass")).digest()
        matched = False
        for digest in self._digests:
            matched |= hmac.compare_digest(presented, digest)
        return matched and scheme.lower() == "bearer" and bool(key.strip())
