"""Values as every front end writes them: times as ISO-8601 UTC, a column edge's transformations, names
with terminal controls and bidi overrides made visible."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any


def iso(value: Any) -> Any:
    """Datetimes as ISO-8601 UTC strings (``Z``); everything else unchanged."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value


def transformation_label(edge: dict[str, Any]) -> str | None:
    """``TYPE/SUBTYPE`` of each distinct transformation on a column edge, ``unknown`` when the producer did
    not say DIRECT or INDIRECT (legacy facets, dbt, Airflow's SQL parser); None without any."""
    labels = {
        (t.get("type") or "unknown") + (f"/{t['subtype']}" if t.get("subtype") else "")
        for t in edge.get("transformations") or []
    }
    return ", ".join(sorted(labels)) or None


# C0 and C1 controls, DEL, and the Unicode bidirectional formatting characters (embeddings, overrides,
# isolates, marks) that can reorder what a reader sees (CVE-2021-42574, "Trojan Source").
_UNSAFE = frozenset(
    [
        *range(0x00, 0x20),
        *range(0x7F, 0xA0),
        0x061C,
        0x200E,
        0x200F,
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    ]
)


_UNSAFE_PATTERN = re.compile("[" + "".join(f"\\u{code:04x}" for code in sorted(_UNSAFE)) + "]")


def escape_unsafe(text: str, *, keep: str = "", as_json: bool = False) -> str:
    """``text`` with control and bidi-formatting characters, but those in ``keep``, written as visible
    escapes: ``\\x1b`` below U+0100 and ``\\u202e`` above, or with ``as_json`` the JSON escapes ``\\u001b``
    and ``\\u202e`` (for a JSON text whose strings are already escaped by its encoder: ``keep`` its line
    breaks). The one escaping of names for every output: tables, the graph's dot, mermaid and JSON."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 and not as_json else f"\\u{code:04x}"

    return _UNSAFE_PATTERN.sub(escape, text)
