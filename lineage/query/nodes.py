"""The lineage graph as read: jobs and canonical datasets, the fields of datasets, and a walk's answer.

Nodes are jobs and canonical datasets; ``job_edges`` links them (a dataset is an ``input`` of a job, a job
``output``s a dataset). A hop is one such edge, so a dataset's producers are 1 hop upstream and the
datasets those producers read are 2 hops upstream. Column lineage follows ``column_edges``; a column edge
crosses one job, i.e. two hops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

JOB, DATASET = "job", "dataset"
UPSTREAM, DOWNSTREAM, BOTH = "upstream", "downstream", "both"
# Every edge of a node whatever its direction: the readers of a dataset a job reads are reached too
# (Marquez's lineage graph walks so).
ANY = "any"
VIA_DATASETS, VIA_DEPENDENCIES, VIA_BOTH = "datasets", "dependencies", "both"  # what a walk follows
GRANULARITY_JOB, GRANULARITY_PARENT = "job", "parent"  # a job as reported, or collapsed into its parent
TERMINAL_STATES = ("COMPLETE", "FAIL", "ABORT")
# Field name shown for the dataset side of a dataset-level column edge (a filter or join key that
# affects every row of the target, but no one field).
WHOLE_DATASET = "*"


def display_name(namespace: str, name: str) -> str:
    """``namespace/name`` the way people write dataset URIs (``file`` + ``/x`` becomes ``file:///x``)."""
    if name.startswith("/"):
        return f"{namespace}{'' if '://' in namespace else '://'}{name}"
    return f"{namespace}/{name}"


def node_id(kind: str, namespace: str, name: str) -> str:
    return f"{kind}:{namespace}/{name}"


class _NodeKey(NamedTuple):
    kind: str
    namespace: str
    name: str
    dataset_id: str | None = None


class Node(_NodeKey):
    """A job or a canonical dataset.

    A named tuple, so hashing and equality run in C (a walk does both hundreds of thousands of times for a
    large answer: a frozen dataclass's Python ``__hash__``/``__eq__`` took 12 ms of a 6,633-node answer at
    tier M); a subclass without ``__slots__``, so ``id`` and ``label`` are kept once computed.
    """

    @cached_property
    def id(self) -> str:
        return node_id(self.kind, self.namespace, self.name)

    @cached_property
    def label(self) -> str:
        if self.kind == DATASET:
            return display_name(self.namespace, self.name)
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Field:
    dataset: Node
    field: str

    @property
    def label(self) -> str:
        return f"{self.dataset.label}.{self.field}"


@dataclass
class Traversal:
    """Nodes reached from a root with their hop counts, the edges followed and the column paths."""

    root: Node
    direction: str
    depth: int | None
    hops: dict[Node, int] = field(default_factory=dict)
    edges: set[tuple[Node, Node, str]] = field(default_factory=set)  # (dataset, job, input|output)
    # Job-to-job dependencies followed (--via dependencies|both): (upstream job, downstream job, source).
    job_links: set[tuple[Node, Node, str]] = field(default_factory=set)
    columns: dict[Field, int] = field(default_factory=dict)  # reached fields -> jobs crossed
    column_edges: list[dict[str, Any]] = field(default_factory=list)
