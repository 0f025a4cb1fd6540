"""API keys: ``Authorization: Bearer <key>``, keys kept only as SHA-256 hex digests.

A presented key is hashed and compared with every configured digest in constant time
(``hmac.compare_digest``, no early exit), and a refusal never says whether the header was missing,
malformed or the key unknown.

A key may be limited (``serve.api_keys``): to reading or writing, and to namespaces (:class:`Scope`). The
request's :class:`Principal` carries that; the intake and the read API apply it (lineage.serve.scope).
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Scope:
    """The namespaces a key may see or write: fnmatch-style globs (``*``, ``?``, ``[...]``), matched
    case-sensitively against the whole namespace. ``patterns`` None: every namespace (an unscoped key)."""

    patterns: tuple[str, ...] | None = None

    @property
    def unlimited(self) -> bool:
        return self.patterns is None

    def allows(self, namespace: str | None) -> bool:
        if self.patterns is None:
            return True
        if namespace is None:
            return False
        return any(fnmatch.fnmatchcase(namespace, pattern) for pattern in self.patterns)


EVERYWHERE = Scope()
READ, WRITE = "read", "write"


@dataclass(frozen=True)
class Principal:
    """Who a request is: the key's name (never the key), what it may do (``read``, ``write``) and where."""

    name: str | None = None
    scope: Scope = EVERYWHERE
    access: frozenset[str] = frozenset((READ, WRITE))

    def may(self, capability: str) -> bool:
        return capability in self.access


ANONYMOUS = Principal()  # no key configured: the service listens on loopback only


class ApiKeys:
    """The configured digests, each with its principal; with none, every request is let through (the
    service is loopback only) with full access."""

    def __init__(self, digests: Iterable[str], scoped: Iterable[tuple[str, Principal]] = ()) -> None:
        found: dict[str, Principal] = {d.lower(): ANONYMOUS for d in digests}
        for digest, principal in scoped:
            digest = digest.lower()
            if found.get(digest, principal) != principal:
                raise ValueError(
                    f"API key digest {digest[:12]}... is configured twice, with different access"
                )
            found[digest] = principal
        self._keys = tuple((bytes.fromhex(d), p) for d, p in found.items())

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def authenticate(self, authorization: str | None) -> Principal | None:
        """The principal of the presented key, or None (no key, a malformed header, an unknown key)."""
        if not self._keys:
            return ANONYMOUS
        scheme, _, key = (authorization or "").partition(" ")
        # aiohttp keeps a header's non-UTF-8 bytes as lone surrogates; "surrogatepass" encodes them to bytes
        # that are never valid UTF-8, so such a key hashes to no configured key's digest (a 401, not a 500).
        presented = hashlib.sha256(key.strip().encode("utf-8", "surrogatepass")).digest()
        matched: Principal | None = None
        for digest, principal in self._keys:  # every digest compared: no early exit
            if hmac.compare_digest(presented, digest):
                matched = principal
        if matched is None or scheme.lower() != "bearer" or not key.strip():
            return None
        return matched

    def allows(self, authorization: str | None) -> bool:
        return self.authenticate(authorization) is not None
