"""The one error of the query core: a question that cannot be answered, said in one line."""

from __future__ import annotations

from collections.abc import Sequence


class LookupError_(Exception):
    """A question that cannot be answered: unknown node, empty catalog, bad input. One line for users."""


class UnknownNode(LookupError_):
    """The node, field or run asked about does not exist (the read API answers 404, with the suggestions)."""

    def __init__(self, message: str, suggestions: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.suggestions = list(suggestions)
