"""What a question is asked with, parsed the same for every front end: times, tags, bounded integers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from lineage.query.errors import LookupError_

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

# The largest integer a parameter takes (a signed 64-bit integer): a larger ``--depth``/``depth`` is
# refused as bad input (it would overflow the JSON encoder and Arrow), not answered with an error.
MAX_INT = 2**63 - 1


def shown_value(text: str, limit: int = 40) -> str:
    """``text`` quoted for an error message, cut to ``limit`` characters (a 5,000-digit value is one line)."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def parse_time(text: str, *, now: datetime | None = None) -> datetime:
    """ISO-8601 (``2026-11-20``, ``2026-11-20T08:00:00Z``, naive = UTC) or a relative ``30m``/``2h``/``7d``.

    Raises:
        LookupError_: anything else, and a time outside the years 1-9999 (``999999999d`` ago).
    """
    value = text.strip()
    relative = _RELATIVE.match(value.lower())
    if relative:
        try:
            delta = timedelta(**{_UNITS[relative.group(2)]: int(relative.group(1))})
            return (now or datetime.now(UTC)) - delta
        except (OverflowError, ValueError):  # beyond timedelta/datetime, or past int()'s 4,300 digits
            raise LookupError_(
                f"bad time {shown_value(text)}: too far in the past (before the year 1)"
            ) from None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise LookupError_(
            f"bad time {shown_value(text)}: expected ISO-8601 (2026-11-20, 2026-11-20T08:00:00Z) "
            "or relative (30m, 2h, 7d)"
        ) from None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    try:
        parsed.astimezone(UTC)  # 0001-01-01T00:00:00+01:00 is before the year 1 in UTC
    except OverflowError:
        raise LookupError_(f"bad time {shown_value(text)}: outside the years 1-9999 in UTC") from None
    return parsed


Tag = tuple[str, str | None]  # key, and the value it must have (None: any value)


def parse_tag(text: str) -> Tag:
    """``KEY`` or ``KEY=VALUE`` (keys compare case-insensitively, values exactly)."""
    key, sep, value = text.partition("=")
    if not key.strip():
        raise LookupError_(f"not a tag: {text!r} (expected KEY or KEY=VALUE)")
    return key.strip(), value if sep else None


def has_tag(carried: Sequence[dict] | None, wanted: Sequence[Tag]) -> bool:
    """Whether ``carried`` (a tags facet's ``tags``: key, value, source) holds one of ``wanted``."""
    for tag in carried or ():
        key = str(tag.get("key") or "").lower()
        for want_key, want_value in wanted:
            if key == want_key.lower() and (want_value is None or tag.get("value") == want_value):
                return True
    return False
