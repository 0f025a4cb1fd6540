"""The read half of ``lineage serve``: Marquez-compatible GETs and our own ``/api/v2`` questions.

Handlers are thin: parse and check the query with the CLI's rules (unknown node -> 404 with suggestions,
bad depth or time -> 400), take the current index once, answer from it alone. Read-only; the same API keys
as the intake when any are configured.

The answer itself (a walk, a search, its JSON) is worked out in a small thread pool the app's lifespan owns,
never on the event loop: the intake, ``/healthz`` and the other requests go on being answered meanwhile,
and a stop signal is handled at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aiohttp import web

from lineage.graph.render import FORMATS
from lineage.query import answers, versions
from lineage.query.diff import DEFAULT_LIMIT, windows
from lineage.query.diff import diff as diff_windows
from lineage.query.errors import LookupError_, UnknownNode
from lineage.query.health import health_of
from lineage.query.nodes import (
    BOTH,
    DOWNSTREAM,
    GRANULARITY_JOB,
    GRANULARITY_PARENT,
    UPSTREAM,
    VIA_BOTH,
    VIA_DATASETS,
    VIA_DEPENDENCIES,
    Node,
)
from lineage.query.params import MAX_INT, Tag, parse_tag, parse_time, shown_value
from lineage.query.tags import tags_of
from lineage.query.versions import run_versions
from lineage.serve import errors, marquez
from lineage.serve.auth import READ as READ_ACCESS
from lineage.serve.auth import ApiKeys, Scope
from lineage.serve.index import IndexedStore, ReadIndex, lifespan
from lineage.serve.scope import ScopedStore, scoped_store
from lineage.settings import Settings

READ = web.AppKey("read_index", ReadIndex)
READ_KEYS = web.AppKey("read_api_keys", ApiKeys)

BAD_PARAMETER = "BAD_PARAMETER"
NOT_BUILT = "LINEAGE_NOT_BUILT"
MARQUEZ_DEPTH = 20  # Marquez's default depth (its OpenAPI spec)
LIMIT = 100
READ_THREADS = 4
STOPPING = "SERVICE_STOPPING"  # a request still arriving once the read pool is shut down
# A scoped key's walk answers: how many nodes the same walk reaches without the scope that it left out.
WITHHELD_HEADER = "X-Lineage-Withheld-Nodes"


class ReadPool:
    """The threads that work out read answers, started and stopped by the app's lifespan.

    Few (the work holds the GIL: more threads would not answer faster, only interleave more answers), and
    not asyncio's default executor, which ``/healthz`` and the index refresh use: a burst of slow reads
    queues here, not in front of them.
    """

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.executor: ThreadPoolExecutor | None = None

    async def run(self, work: Callable[[], Any]) -> Any:
        if self.executor is None:
            raise errors.ApiError(503, STOPPING, "the service is stopping", headers={"Retry-After": "5"})
        return await asyncio.get_running_loop().run_in_executor(self.executor, work)


async def pool_lifespan(pool: ReadPool) -> AsyncIterator[None]:
    executor = ThreadPoolExecutor(pool.threads, thread_name_prefix="lineage-read")
    pool.executor = executor
    try:
        yield
    finally:
        pool.executor = None
        # Answers not started are dropped; one still being worked out is not waited for here (the server
        # gave its request until the shutdown timeout already): each is bounded (a search is linear in the
        # names, a walk in the graph) and ends on its own.
        executor.shutdown(wait=False, cancel_futures=True)


READ_POOL = web.AppKey("read_pool", ReadPool)


def _store(request: web.Request) -> tuple[IndexedStore, Scope]:
    """The current index and the scope of the request's key (lineage.serve.scope: what it may see)."""
    principal = request.app[READ_KEYS].authenticate(request.headers.get("Authorization"))
    if principal is None:
        # the intake's refusal, word for word (lineage.serve.intake)
        headers = {"WWW-Authenticate": "Bearer"}
        raise errors.ApiError(401, errors.UNAUTHORIZED, "a valid API key is required", headers=headers)
    if not principal.may(READ_ACCESS):
        raise errors.ApiError(403, errors.FORBIDDEN, "this API key may not read (serve.api_keys access)")
    index = request.app[READ]
    store = index.current
    if store is None:
        why = index.error or "the lineage tables are being loaded"
        raise errors.ApiError(503, NOT_BUILT, why, headers={"Retry-After": "5"})
    return store, principal.scope


def _int(request: web.Request, name: str, default: int | None, minimum: int = 1) -> int | None:
    text = request.query.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:  # not digits, or more than int()'s 4,300
        message = f"{name} must be an integer, got {shown_value(text)}"
        raise errors.ApiError(400, BAD_PARAMETER, message) from None
    if value < minimum:
        raise errors.ApiError(400, BAD_PARAMETER, f"{name} must be >= {minimum}, got {shown_value(text)}")
    if value > MAX_INT:  # beyond 64 bits: the JSON encoder (which echoes depth) and Arrow overflow
        raise errors.ApiError(400, BAD_PARAMETER, f"{name} must be <= {MAX_INT}, got {shown_value(text)}")
    return value


def _paging(request: web.Request, default_limit: int = LIMIT) -> tuple[int, int]:
    """``limit`` (0 answers no item, only ``totalCount``, as Marquez does) and ``offset``."""
    limit = _int(request, "limit", default_limit, 0)
    offset = _int(request, "offset", 0, 0)
    return (default_limit if limit is None else limit), (offset or 0)


def _bool(request: web.Request, name: str, default: bool) -> bool:
    text = request.query.get(name)
    if text is None or text == "":
        return default
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise errors.ApiError(400, BAD_PARAMETER, f"{name} must be true or false, got {text!r}")


def _required(request: web.Request, name: str) -> str:
    value = request.query.get(name, "").strip()
    if not value:
        raise errors.ApiError(400, BAD_PARAMETER, f"query parameter {name} is required")
    return value


def _time(request: web.Request, name: str = "as_of") -> datetime | None:
    """A time parameter (:func:`parse_time`); a bad or out-of-range one is a 400 naming the parameter."""
    text = request.query.get(name)
    if not text:
        return None
    try:
        return parse_time(text)
    except LookupError_ as exc:
        raise errors.ApiError(400, BAD_PARAMETER, f"{name}: {exc}") from None


def _choice(request: web.Request, name: str, choices: tuple[str, ...]) -> str:
    """A parameter from a closed set, the first being the default (the CLI's option of the same name)."""
    text = request.query.get(name) or choices[0]
    if text not in choices:
        raise errors.ApiError(400, BAD_PARAMETER, f"{name} must be one of {', '.join(choices)}, got {text!r}")
    return text


def _walk_options(request: web.Request) -> dict[str, str]:
    """``via`` and ``granularity`` of a walk, checked like the CLI's ``--via`` and ``--granularity``."""
    return {
        "via": _choice(request, "via", (VIA_DATASETS, VIA_DEPENDENCIES, VIA_BOTH)),
        "granularity": _choice(request, "granularity", (GRANULARITY_JOB, GRANULARITY_PARENT)),
    }


def _tags(request: web.Request) -> list[Tag]:
    """Every ``tag`` parameter (KEY or KEY=VALUE, repeatable: any matches), as ``--tag``."""
    try:
        return [parse_tag(text) for text in request.query.getall("tag", [])]
    except LookupError_ as exc:
        raise errors.ApiError(400, BAD_PARAMETER, str(exc)) from exc


async def _answer(request: web.Request, work: Callable[[IndexedStore], Any]) -> web.Response:
    """Run ``work`` on the current index in the read pool, its JSON encoded there too; the CLI's errors
    become 404 (unknown) or 400 (bad input)."""
    whole, scope = _store(request)

    def answer() -> web.Response:
        store = scoped_store(whole, scope)  # a scoped key's view: made here, off the event loop, once
        if not isinstance(store, ScopedStore):
            payload = work(store)
            return payload if isinstance(payload, web.Response) else errors.json_response(200, payload)
        # A scoped key: the walks made for this answer say how many nodes they withheld.
        with store.counting() as withheld:
            payload = work(store)
        if not withheld:
            return payload if isinstance(payload, web.Response) else errors.json_response(200, payload)
        if isinstance(payload, web.Response):
            payload.headers[WITHHELD_HEADER] = str(sum(withheld))
            return payload
        if isinstance(payload, dict):
            payload = {**payload, "withheld": sum(withheld)}
        return errors.json_response(200, payload, {WITHHELD_HEADER: str(sum(withheld))})

    try:
        return await request.app[READ_POOL].run(answer)
    except UnknownNode as exc:
        response = errors.error_payload(errors.NOT_FOUND, str(exc), suggestions=exc.suggestions)
        return errors.json_response(404, response)
    except LookupError_ as exc:
        raise errors.ApiError(400, BAD_PARAMETER, str(exc)) from exc


def _unknown(what: str) -> UnknownNode:
    return UnknownNode(f"unknown {what}")


def _known_job(store: IndexedStore, key: tuple[str, str]) -> None:
    """404 for a job not in the index, with the CLI's suggestions."""
    if key not in store.job_keys:
        store.resolve(f"job:{key[0]}/{key[1]}")  # raises UnknownNode with close names
        raise _unknown(f"job {key[0]}/{key[1]}")


# -- Marquez ----------------------------------------------------------------------------------------------
async def namespaces(request: web.Request) -> web.Response:
    limit, offset = _paging(request)

    def work(store: IndexedStore) -> Any:
        found = marquez.namespace_list(store)["namespaces"]
        return marquez.paged("namespaces", found, limit, offset)

    return await _answer(request, work)


async def namespace(request: web.Request) -> web.Response:
    name = request.match_info["namespace"]

    def work(store: IndexedStore) -> Any:
        for entry in marquez.namespace_list(store)["namespaces"]:
            if entry["name"] == name:
                return entry
        raise _unknown(f"namespace {name!r}")

    return await _answer(request, work)


def _jobs_json(store: IndexedStore, keys: list[tuple[str, str]]) -> list[dict[str, Any]]:
    nodes = [store.job_node(*k) for k in keys]
    latest = marquez.latest_runs(store, nodes)
    return [marquez.job_json(store, node, latest) for node in nodes]


async def jobs(request: web.Request) -> web.Response:
    name = request.match_info["namespace"]
    limit, offset = _paging(request)

    def work(store: IndexedStore) -> Any:
        keys = sorted(k for k in store.job_keys if k[0] == name)
        chosen = marquez.page(keys, limit, offset)
        return {"jobs": _jobs_json(store, chosen), "totalCount": len(keys)}

    return await _answer(request, work)


async def job(request: web.Request) -> web.Response:
    key = (request.match_info["namespace"], request.match_info["job"])

    def work(store: IndexedStore) -> Any:
        _known_job(store, key)
        return marquez.job_json(store, store.job_node(*key))

    return await _answer(request, work)


async def job_runs(request: web.Request) -> web.Response:
    key = (request.match_info["namespace"], request.match_info["job"])
    limit, offset = _paging(request)

    def work(store: IndexedStore) -> Any:
        _known_job(store, key)
        rows = store.runs(job=f"job:{key[0]}/{key[1]}")
        chosen = marquez.page(rows, limit, offset)
        found = run_versions(store, chosen)
        listed = [marquez.run_json(store, r, found.get(r["run_id"])) for r in chosen]
        return {"runs": listed, "totalCount": len(rows)}

    return await _answer(request, work)


async def job_versions(request: web.Request) -> web.Response:
    key = (request.match_info["namespace"], request.match_info["job"])
    limit, offset = _paging(request)

    def work(store: IndexedStore) -> Any:
        _known_job(store, key)
        found = versions.job_versions(store, store.job_node(*key))
        chosen = marquez.page(found, limit, offset)
        return {"versions": [marquez.job_version_json(store, v) for v in chosen], "totalCount": len(found)}

    return await _answer(request, work)


async def job_version(request: web.Request) -> web.Response:
    key = (request.match_info["namespace"], request.match_info["job"])
    wanted = request.match_info["version"]

    def work(store: IndexedStore) -> Any:
        _known_job(store, key)
        return marquez.job_version_json(store, versions.job_version(store, store.job_node(*key), wanted))

    return await _answer(request, work)


async def run_lineage_upstream(request: web.Request) -> web.Response:
    run_id = _required(request, "runId")
    depth = _int(request, "depth", MARQUEZ_DEPTH, 0)

    def work(store: IndexedStore) -> Any:
        return marquez.upstream_run_json(store, versions.upstream_runs(store, run_id, depth or 0))

    return await _answer(request, work)


async def run(request: web.Request) -> web.Response:
    run_id = request.match_info["id"]
    return await _answer(request, lambda store: marquez.run_json(store, store.run(run_id)))


async def datasets(request: web.Request) -> web.Response:
    name = request.match_info["namespace"]
    limit, offset = _paging(request)

    def work(store: IndexedStore) -> Any:
        nodes = sorted((n for n in store.dataset_nodes.values() if n.namespace == name), key=lambda n: n.name)
        chosen = marquez.page(nodes, limit, offset)
        return {"datasets": [marquez.dataset_json(store, n) for n in chosen], "totalCount": len(nodes)}

    return await _answer(request, work)


async def dataset(request: web.Request) -> web.Response:
    namespace_name, name = request.match_info["namespace"], request.match_info["dataset"]

    def work(store: IndexedStore) -> Any:
        return marquez.dataset_json(store, _dataset_node(store, namespace_name, name))

    return await _answer(request, work)


async def lineage(request: web.Request) -> web.Response:
    node_id = _required(request, "nodeId")
    depth = _int(request, "depth", MARQUEZ_DEPTH, 0)

    def work(store: IndexedStore) -> Any:
        node, _ = marquez.parse_node_id(store, node_id)
        return marquez.lineage_graph(store, node, MARQUEZ_DEPTH if depth is None else depth)

    return await _answer(request, work)


async def column_lineage(request: web.Request) -> web.Response:
    node_id = _required(request, "nodeId")
    depth = _int(request, "depth", MARQUEZ_DEPTH) or MARQUEZ_DEPTH
    with_downstream = _bool(request, "withDownstream", False)

    def work(store: IndexedStore) -> Any:
        plain, version = marquez.split_version(node_id)
        node, field = marquez.parse_node_id(store, plain)
        as_of = None if version is None else marquez.version_time(store, node, version)
        return marquez.column_lineage(store, node, field, depth, with_downstream, as_of)

    return await _answer(request, work)


async def search(request: web.Request) -> web.Response:
    q = _required(request, "q")
    if len(q) > marquez.MAX_SEARCH_CHARS:
        message = f"q must be at most {marquez.MAX_SEARCH_CHARS} characters, got {len(q)}"
        raise errors.ApiError(400, BAD_PARAMETER, message)
    what = request.query.get("filter", "").lower() or None
    if what not in (None, "job", "dataset"):
        raise errors.ApiError(400, BAD_PARAMETER, f"filter must be job or dataset, got {what!r}")
    sort = request.query.get("sort", "name").lower()
    if sort not in marquez.SEARCH_SORTS:
        choices = ", ".join(marquez.SEARCH_SORTS)
        raise errors.ApiError(400, BAD_PARAMETER, f"sort must be one of {choices}, got {shown_value(sort)}")
    limit, _ = _paging(request, 10)
    namespace_name = request.query.get("namespace") or None
    before, after = _time(request, "before"), _time(request, "after")

    def work(store: IndexedStore) -> Any:
        return marquez.search(
            store, q, what, sort, limit, namespace=namespace_name, before=before, after=after
        )

    return await _answer(request, work)


async def all_jobs(request: web.Request) -> web.Response:
    """Every job of every namespace; ``lastRunStates`` (repeatable) keeps those whose latest run is in
    one of these Marquez run states."""
    limit, offset = _paging(request)
    states = {s.upper() for text in request.query.getall("lastRunStates", []) for s in text.split(",") if s}
    known = set(marquez.RUN_STATES.values()) | {"NEW"}
    if states - known:
        wrong = ", ".join(sorted(states - known))
        raise errors.ApiError(
            400, BAD_PARAMETER, f"lastRunStates must be among {', '.join(sorted(known))}, got {wrong}"
        )

    def work(store: IndexedStore) -> Any:
        keys = sorted(store.job_keys)
        if states:
            keys = [
                k
                for k in keys
                if marquez.RUN_STATES.get(store.job_summary.get(k, {}).get("last_run_reported_state") or "")
                in states
            ]
        chosen = marquez.page(keys, limit, offset)
        return {
            "jobs": _jobs_json(store, chosen),
            "totalCount": len(keys),
        }

    return await _answer(request, work)


async def sources(request: web.Request) -> web.Response:
    limit, offset = _paging(request)

    def work(store: IndexedStore) -> Any:
        found = marquez.sources(store)
        return marquez.paged("sources", found, limit, offset)

    return await _answer(request, work)


async def source(request: web.Request) -> web.Response:
    name = request.match_info["source"]

    def work(store: IndexedStore) -> Any:
        for entry in marquez.sources(store):
            if entry["name"] == name:
                return entry
        raise _unknown(f"source {name!r}")

    return await _answer(request, work)


async def tags(request: web.Request) -> web.Response:
    limit, offset = _paging(request)

    def work(store: IndexedStore) -> Any:
        found = marquez.tags(store)
        return marquez.paged("tags", found, limit, offset)

    return await _answer(request, work)


def _dataset_node(store: IndexedStore, namespace_name: str, name: str) -> Node:
    node = store.dataset_named(namespace_name, name)
    return node if node is not None else store.resolve(f"dataset:{namespace_name}/{name}")


async def dataset_versions(request: web.Request) -> web.Response:
    namespace_name, name = request.match_info["namespace"], request.match_info["dataset"]
    limit, offset = _paging(request)

    def work(store: IndexedStore) -> Any:
        return marquez.versions_page(store, _dataset_node(store, namespace_name, name), limit, offset)

    return await _answer(request, work)


async def dataset_version(request: web.Request) -> web.Response:
    namespace_name, name = request.match_info["namespace"], request.match_info["dataset"]
    version = request.match_info["version"].strip().lower()

    def work(store: IndexedStore) -> Any:
        node = _dataset_node(store, namespace_name, name)
        try:
            return marquez.one_version(store, node, version)
        except UnknownNode:
            raise _unknown(f"version {version!r} of dataset {node.label}") from None

    return await _answer(request, work)


async def run_facets(request: web.Request) -> web.Response:
    run_id = request.match_info["id"]
    kind = _choice(request, "type", ("run", "job"))
    return await _answer(request, lambda store: marquez.run_facets(store, run_id, kind))


async def lineage_events(request: web.Request) -> web.Response:
    limit, offset = _paging(request)
    direction = (request.query.get("sortDirection") or "desc").lower()
    if direction not in ("asc", "desc"):
        raise errors.ApiError(
            400, BAD_PARAMETER, f"sortDirection must be asc or desc, got {shown_value(direction)}"
        )
    before, after = _time(request, "before"), _time(request, "after")

    namespace_name = request.match_info.get("namespace")

    def work(store: IndexedStore) -> Any:
        return marquez.lineage_events(
            store,
            before=before,
            after=after,
            limit=limit,
            offset=offset,
            descending=direction == "desc",
            namespace=namespace_name,
        )

    return await _answer(request, work)


def _stats(what: str) -> Callable[[web.Request], Any]:
    async def handler(request: web.Request) -> web.Response:
        period = (request.query.get("period") or "").upper()
        if period not in marquez.PERIODS:
            raise errors.ApiError(
                400, BAD_PARAMETER, f"period must be DAY or WEEK, got {shown_value(period)}"
            )
        zone_name = request.query.get("timezone") or ""
        if period == "WEEK" and what == "lineage-events" and not zone_name:
            raise errors.ApiError(400, BAD_PARAMETER, "timezone is required for period WEEK")
        try:
            zone = ZoneInfo(zone_name) if zone_name else UTC
        except (ZoneInfoNotFoundError, ValueError):
            raise errors.ApiError(400, BAD_PARAMETER, f"timezone: unknown {shown_value(zone_name)}") from None
        buckets = marquez.intervals(period, zone)

        def work(store: IndexedStore) -> Any:
            if what == "lineage-events":
                return marquez.event_stats(store, buckets)
            return marquez.count_stats(marquez.first_seen_of(store, what), buckets)

        return await _answer(request, work)

    return handler


READ_ONLY = "READ_ONLY"


async def read_only(request: web.Request) -> web.Response:
    """Marquez's writes (namespaces, sources, datasets, jobs, runs, tags by hand): not ours to take. The
    model is built from OpenLineage events only; they come in through the intake (POST /api/v1/lineage)."""
    message = (
        f"{request.method} {request.path} is not supported: this read API is read-only "
        "(lineage comes from OpenLineage events only: POST /api/v1/lineage or /api/v1/lineage/batch)"
    )
    raise errors.ApiError(405, READ_ONLY, message, headers={"Allow": "GET, HEAD"})


# -- ours: the CLI's questions and JSON -------------------------------------------------------------------
def _walk(direction: str) -> Callable[[web.Request], Any]:
    async def handler(request: web.Request) -> web.Response:
        node = _required(request, "node")
        depth = _int(request, "depth", answers.DEFAULT_DEPTH)
        columns = _bool(request, "columns", False)
        options, tags = _walk_options(request), _tags(request)

        def work(store: IndexedStore) -> Any:
            as_of = _time(request)
            root, field = store.resolve_field(node) if columns else (store.resolve(node), None)
            walk = store.traverse(
                root, direction, depth, as_of=as_of, columns=columns, field_name=field, **options
            )
            return answers.traversal_json(store, store.keep_tagged(walk, tags), as_of)

        return await _answer(request, work)

    return handler


async def impact(request: web.Request) -> web.Response:
    target = _required(request, "node")
    depth = _int(request, "depth", None)
    return await _answer(request, lambda store: answers.impact_of(store, target, depth, _time(request)))


async def health(request: web.Request) -> web.Response:
    target = _required(request, "node")
    return await _answer(request, lambda store: health_of(store, target))


async def column_tags(request: web.Request) -> web.Response:
    target = _required(request, "dataset")
    field_name = request.query.get("field") or None
    tag = request.query.get("tag") or None
    return await _answer(request, lambda store: tags_of(store, target, field_name, tag))


async def runs(request: web.Request) -> web.Response:
    states = request.query.getall("state", [])
    job_name = request.query.get("job") or None
    limit = _int(request, "limit", 50)
    tags = _tags(request)

    def work(store: IndexedStore) -> Any:
        wanted = answers.state_names(states)
        since = _time(request, "since")
        rows = store.runs(job=job_name, states=wanted, since=since, limit=limit, tags=tags)
        return [answers.run_json(r) for r in rows]

    return await _answer(request, work)


async def run_v2(request: web.Request) -> web.Response:
    run_id = request.match_info["id"]
    return await _answer(request, lambda store: answers.run_detail(store, run_id))


async def dataset_history(request: web.Request) -> web.Response:
    """A dataset's versions (``node``), as ``lineage versions --json``; with ``version``, that version and
    the versions upstream of it, at most ``depth`` writes away (default 10; 0: the version alone)."""
    node = _required(request, "node")
    version = request.query.get("version") or None
    depth = _int(request, "depth", answers.DEFAULT_DEPTH, minimum=0)

    def work(store: IndexedStore) -> Any:
        if version is None:
            return answers.versions_of(store, node)
        assert depth is not None
        return answers.version_lineage(store, node, version, depth)

    return await _answer(request, work)


async def lineage_diff(request: web.Request) -> web.Response:
    """What changed between two windows, as ``lineage diff --json``: ``from``, ``to``, ``base_from``,
    ``base_to`` (the CLI's defaults), optionally around ``node`` within ``depth`` hops; every change
    counted, the first ``limit`` of each kind listed (default 20, ``all=true``: every one); ``format=html``
    the graph page of the changes listed (``lineage diff --graph``)."""
    node = request.query.get("node") or None
    depth = _int(request, "depth", None)
    limit = None if _bool(request, "all", False) else _int(request, "limit", DEFAULT_LIMIT, minimum=0)
    fmt = _choice(request, "format", ("json", "html"))

    def work(store: IndexedStore) -> Any:
        base, current = windows(
            _time(request, "from"),
            _time(request, "to"),
            _time(request, "base_from"),
            _time(request, "base_to"),
        )
        if fmt == "json":
            return answers.diff_of(store, base, current, node, depth, limit)
        from lineage.graph.render import render

        changes = diff_windows(store, base, current, node=node, depth=depth, limit=limit)
        page = render(answers.diff_graph(store, changes, node), "html")
        return web.Response(text=page, content_type="text/html", charset="utf-8")

    return await _answer(request, work)


async def graph(request: web.Request) -> web.Response:
    """The graph page (or dot, mermaid, json) around a node, as ``lineage graph`` writes it."""
    node = _required(request, "node")
    depth = _int(request, "depth", answers.DEFAULT_DEPTH)
    fmt = _choice(request, "format", FORMATS)
    direction = _choice(request, "direction", (BOTH, UPSTREAM, DOWNSTREAM))
    columns = _bool(request, "columns", fmt == "html")
    options = _walk_options(request)

    def work(store: IndexedStore) -> Any:
        from lineage.graph.render import render

        root = store.resolve(node)
        with_columns = columns or fmt == "html"
        walk = store.traverse(root, direction, depth, as_of=_time(request), columns=with_columns, **options)
        text = render(answers.graph_dict(store, walk), fmt)
        types = {"html": "text/html", "json": "application/json", "dot": "text/vnd.graphviz"}
        return web.Response(text=text, content_type=types.get(fmt, "text/plain"), charset="utf-8")

    return await _answer(request, work)


def setup(app: web.Application, settings: Settings, keys: ApiKeys) -> ReadIndex:
    """Add the read routes and the index (loaded and refreshed in the background by the app's lifespan)."""
    index = ReadIndex(settings)
    app[READ] = index
    app[READ_KEYS] = keys
    pool = ReadPool(READ_THREADS)
    app[READ_POOL] = pool
    app.cleanup_ctx.append(lambda _app: pool_lifespan(pool))
    app.cleanup_ctx.append(lambda _app: lifespan(index))
    routes = [
        ("namespaces", "/api/v1/namespaces", namespaces),
        ("namespace", "/api/v1/namespaces/{namespace}", namespace),
        ("jobs", "/api/v1/namespaces/{namespace}/jobs", jobs),
        ("job", "/api/v1/namespaces/{namespace}/jobs/{job}", job),
        ("job_runs", "/api/v1/namespaces/{namespace}/jobs/{job}/runs", job_runs),
        ("job_versions", "/api/v1/namespaces/{namespace}/jobs/{job}/versions", job_versions),
        ("job_version", "/api/v1/namespaces/{namespace}/jobs/{job}/versions/{version}", job_version),
        ("run_lineage_upstream", "/api/v1/runlineage/upstream", run_lineage_upstream),
        ("all_jobs", "/api/v1/jobs", all_jobs),
        ("run", "/api/v1/jobs/runs/{id}", run),
        ("run_facets", "/api/v1/jobs/runs/{id}/facets", run_facets),
        ("datasets", "/api/v1/namespaces/{namespace}/datasets", datasets),
        ("dataset", "/api/v1/namespaces/{namespace}/datasets/{dataset}", dataset),
        ("dataset_versions", "/api/v1/namespaces/{namespace}/datasets/{dataset}/versions", dataset_versions),
        (
            "dataset_version",
            "/api/v1/namespaces/{namespace}/datasets/{dataset}/versions/{version}",
            dataset_version,
        ),
        ("sources", "/api/v1/sources", sources),
        ("source", "/api/v1/sources/{source}", source),
        ("tags", "/api/v1/tags", tags),
        ("lineage", "/api/v1/lineage", lineage),
        ("column_lineage", "/api/v1/column-lineage", column_lineage),
        ("search", "/api/v1/search", search),
        ("events", "/api/v1/events/lineage", lineage_events),
        # marquez-python's list_events asks these (paths of Marquez's older API): the same answer, all
        # events or those of one namespace
        ("events_all", "/api/v1/events", lineage_events),
        ("events_namespace", "/api/v1/events/{namespace}", lineage_events),
        ("stats_events", "/api/v1/stats/lineage-events", _stats("lineage-events")),
        ("stats_jobs", "/api/v1/stats/jobs", _stats("jobs")),
        ("stats_datasets", "/api/v1/stats/datasets", _stats("datasets")),
        ("stats_sources", "/api/v1/stats/sources", _stats("sources")),
        ("upstream", "/api/v2/upstream", _walk(UPSTREAM)),
        ("downstream", "/api/v2/downstream", _walk(DOWNSTREAM)),
        ("impact", "/api/v2/impact", impact),
        ("node_health", "/api/v2/health", health),
        ("column_tags", "/api/v2/tags", column_tags),
        ("runs", "/api/v2/runs", runs),
        ("run_v2", "/api/v2/runs/{id}", run_v2),
        ("versions", "/api/v2/versions", dataset_history),
        ("diff", "/api/v2/diff", lineage_diff),
        ("graph", "/api/v2/graph", graph),
    ]
    resources: dict[str, Any] = {}
    for name, path, handler in routes:  # named, so /metrics counts them by endpoint (read_<name>)
        resource = resources[path] = app.router.add_resource(path, name=f"read_{name}")
        resource.add_route("HEAD", handler)
        resource.add_route("GET", handler)
    for i, (method, path) in enumerate(MARQUEZ_WRITES):
        if path not in resources:
            resources[path] = app.router.add_resource(path, name=f"read_only_{i}")
        resources[path].add_route(method, read_only)
    return index


# Marquez's write endpoints (its OpenAPI document), answered 405 READ_ONLY. POST /api/v1/lineage is the
# intake's (lineage.serve.intake) and not listed.
MARQUEZ_WRITES = (
    ("PUT", "/api/v1/namespaces/{namespace}"),
    ("DELETE", "/api/v1/namespaces/{namespace}"),
    ("PUT", "/api/v1/sources/{source}"),
    ("PUT", "/api/v1/namespaces/{namespace}/datasets/{dataset}"),
    ("DELETE", "/api/v1/namespaces/{namespace}/datasets/{dataset}"),
    ("POST", "/api/v1/namespaces/{namespace}/datasets/{dataset}/tags/{tag}"),
    ("DELETE", "/api/v1/namespaces/{namespace}/datasets/{dataset}/tags/{tag}"),
    ("POST", "/api/v1/namespaces/{namespace}/datasets/{dataset}/fields/{field}/tags/{tag}"),
    ("DELETE", "/api/v1/namespaces/{namespace}/datasets/{dataset}/fields/{field}/tags/{tag}"),
    ("PUT", "/api/v1/namespaces/{namespace}/jobs/{job}"),
    ("DELETE", "/api/v1/namespaces/{namespace}/jobs/{job}"),
    ("POST", "/api/v1/namespaces/{namespace}/jobs/{job}/runs"),
    ("POST", "/api/v1/jobs/runs/{id}/start"),
    ("POST", "/api/v1/jobs/runs/{id}/complete"),
    ("POST", "/api/v1/jobs/runs/{id}/fail"),
    ("POST", "/api/v1/jobs/runs/{id}/abort"),
    ("PUT", "/api/v1/tags/{tag}"),
)
