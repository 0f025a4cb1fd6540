"""``lineage``: ask the lineage tables questions, close stuck runs, draw the graph. No JVM: pyiceberg only.

Every query command prints a human-readable table, or JSON with ``--json``. Errors are one line on
stderr and a non-zero exit (2: the question cannot be answered, 1: sending or writing failed).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from lineage.cli import output
from lineage.cli.remote import RemoteAnswers, Unreachable
from lineage.cli.sql import sql_command
from lineage.graph.render import FORMATS
from lineage.query.answers import (
    DEFAULT_DEPTH,
    diff_graph,
    diff_of,
    graph_dict,
    impact_of,
    run_detail,
    run_json,
    state_names,
    traversal_json,
    version_lineage,
    versions_of,
)
from lineage.query.diff import DEFAULT_LIMIT, windows
from lineage.query.diff import diff as changes_between
from lineage.query.errors import LookupError_
from lineage.query.health import health_of
from lineage.query.nodes import (
    BOTH,
    DOWNSTREAM,
    GRANULARITY_JOB,
    GRANULARITY_PARENT,
    TERMINAL_STATES,
    UPSTREAM,
    VIA_BOTH,
    VIA_DATASETS,
    VIA_DEPENDENCIES,
)
from lineage.query.params import MAX_INT, parse_tag, parse_time, shown_value
from lineage.query.store import LineageStore
from lineage.query.tags import tags_of

# What the object store's clients (pyarrow's S3 client under pyiceberg; boto-style clients) say when a
# request had no credentials or refused ones.
_DENIED = re.compile(
    r"ACCESS_DENIED|AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|InvalidToken|ExpiredToken|"
    r"NoCredentials|Unable to locate credentials|MISSING_AUTHENTICATION_TOKEN|HTTP status 403"
)
CLUSTER_ENV = 'eval "$(.venv/bin/python -m lineage.cluster env)"'  # the local stack's keys (README)
# The commands a running `lineage serve` answers for --api (its /api/v2 endpoints, docs/read-api.md).
REMOTE_COMMANDS = (
    "upstream",
    "downstream",
    "impact",
    "health",
    "tags",
    "runs",
    "run",
    "versions",
    "diff",
    "graph",
)


class Context:
    def __init__(self, config: str | None, api: str | None = None) -> None:
        self.config = config
        self.api = api or None
        self._store: LineageStore | None = None
        self._remote: RemoteAnswers | None = None

    @property
    def remote(self) -> RemoteAnswers | None:
        """The read API asked instead of the lake (``--api``), or None."""
        if self.api is not None and self._remote is None:
            self._remote = RemoteAnswers(self.api)
        return self._remote

    @property
    def store(self) -> LineageStore:
        if self._store is None:
            self._store = LineageStore(self.settings())
        return self._store

    def settings(self) -> Any:
        if self.config:
            os.environ["LINEAGE_CONFIG"] = self.config
        from pydantic import ValidationError

        from lineage.settings import load_settings

        try:
            return load_settings()
        except (ValidationError, FileNotFoundError, ValueError) as exc:
            message = str(exc).strip().splitlines()
            raise LookupError_(f"bad settings: {' '.join(message[:3])}") from exc


pass_context = click.make_pass_decorator(Context)
via_option = click.option(
    "--via",
    type=click.Choice([VIA_DATASETS, VIA_DEPENDENCIES, VIA_BOTH]),
    default=VIA_DATASETS,
    show_default=True,
    help="Follow data flow (datasets), job-to-job dependencies (declared, Airflow task order, parent -> "
    "child), or both.",
)
granularity_option = click.option(
    "--granularity",
    type=click.Choice([GRANULARITY_JOB, GRANULARITY_PARENT]),
    default=GRANULARITY_JOB,
    show_default=True,
    help="job: every job as reported; parent: child jobs collapsed into their parent job (a Spark "
    "application's actions, an Airflow DAG's tasks), their edges merged.",
)
tag_option = click.option(
    "--tag",
    "tags",
    multiple=True,
    help="Only what carries this tag (KEY or KEY=VALUE; from the tags facets; repeatable, any matches).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def _time(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    """A time option; a bad or out-of-range one (``999999999d``) is one line and exit 2 (``LookupError_``)."""
    return parse_time(value) if value else None


class Count(click.IntRange):
    """A count from 1 to a 64-bit integer's largest (a larger one is refused here, not an overflow later);
    a value of thousands of digits is quoted cut in the one-line error."""

    def __init__(self) -> None:
        super().__init__(min=1, max=MAX_INT)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and len(value.strip().lstrip("+-0")) > len(str(MAX_INT)):
            self.fail(f"{shown_value(value)} is not an integer in the range 1<=x<={MAX_INT}.", param, ctx)
        return super().convert(value, param, ctx)


DEPTH = Count()


depth_option = click.option(
    "--depth",
    type=DEPTH,
    default=DEFAULT_DEPTH,
    show_default=True,
    help="Hops to follow (dataset -> job is one hop, dataset -> job -> dataset two).",
)
as_of_option = click.option(
    "--as-of", callback=_time, help="Keep only edges first seen by then (ISO-8601 or 2h, 7d ago)."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option(
    "--config", envvar="LINEAGE_CONFIG", help="Settings file (default conf/lineage.toml; env LINEAGE_CONFIG)."
)
@click.option(
    "--api",
    envvar="LINEAGE_API",
    metavar="URL",
    help="Ask a running `lineage serve` (e.g. http://127.0.0.1:5000; env LINEAGE_API) instead of reading the "
    f"lake: {', '.join(REMOTE_COMMANDS)}, with no catalog settings or lake credentials here (an API key "
    "from LINEAGE_API_KEY).",
)
@click.version_option(package_name="lineage-lakehouse")
@click.pass_context
def cli(ctx: click.Context, config: str | None, api: str | None) -> None:
    """Query the lineage lakehouse (lake.lineage.*) without Spark."""
    ctx.obj = Context(config, api)


def _traversal_command(direction: str) -> Callable[..., None]:
    @click.argument("node")
    @depth_option
    @as_of_option
    @click.option("--columns", is_flag=True, help="Also follow column lineage.")
    @via_option
    @granularity_option
    @tag_option
    @json_option
    @pass_context
    def command(
        ctx: Context,
        node: str,
        depth: int,
        as_of: datetime | None,
        columns: bool,
        via: str,
        granularity: str,
        tags: Sequence[str],
        as_json: bool,
    ) -> None:
        if ctx.remote is not None:
            data = ctx.remote.json(
                f"/api/v2/{direction}",
                {
                    "node": node,
                    "depth": depth,
                    "as_of": as_of,
                    "columns": columns,
                    "via": via,
                    "granularity": granularity,
                    "tag": list(tags),
                },
            )
        else:
            store = ctx.store
            root, field_name = store.resolve_field(node) if columns else (store.resolve(node), None)
            walk = store.traverse(
                root,
                direction,
                depth,
                as_of=as_of,
                columns=columns,
                field_name=field_name,
                via=via,
                granularity=granularity,
            )
            walk = store.keep_tagged(walk, [parse_tag(t) for t in tags])
            data = traversal_json(store, walk, as_of)
        if as_json:
            output.emit_json(data)
        else:
            output.print_traversal(data)

    command.__doc__ = (
        f"Everything {direction} of NODE: a job or a dataset under any of its names (aliases resolve to "
        "the canonical dataset)."
    )
    return command


cli.command("upstream")(_traversal_command(UPSTREAM))
cli.command("downstream")(_traversal_command(DOWNSTREAM))


@cli.command()
@click.argument("target", metavar="DATASET[.FIELD]")
@click.option("--depth", type=DEPTH, default=None, help="Hops to follow (default: all).")
@as_of_option
@json_option
@pass_context
def impact(ctx: Context, target: str, depth: int | None, as_of: datetime | None, as_json: bool) -> None:
    """Everything downstream of a dataset (or one of its fields) that a change would affect."""
    if ctx.remote is not None:
        data = ctx.remote.json("/api/v2/impact", {"node": target, "depth": depth, "as_of": as_of})
    else:
        data = impact_of(ctx.store, target, depth, as_of)
    if as_json:
        output.emit_json(data)
    else:
        output.print_impact(data)


@cli.command()
@click.argument("node")
@json_option
@pass_context
def health(ctx: Context, node: str, as_json: bool) -> None:
    """NODE's health and what upstream causes it: its last write (or run) FAIL or LOST, failing data-quality
    assertions, late data (docs/cli.md); each upstream cause with its path to NODE."""
    if ctx.remote is not None:
        data = ctx.remote.json("/api/v2/health", {"node": node})
    else:
        data = health_of(ctx.store, node)
    if as_json:
        output.emit_json(data)
    else:
        output.print_health(data)


@cli.command("tags")
@click.argument("dataset")
@click.option("--field", "field_name", help="Only this column's tags.")
@click.option("--tag", help="Only this tag (KEY or KEY=VALUE).")
@json_option
@pass_context
def tags_command(ctx: Context, dataset: str, field_name: str | None, tag: str | None, as_json: bool) -> None:
    """The tags of DATASET's columns, from the tags facets and the [tags] rules, each with its origin and the
    path it came along (propagated downstream along DIRECT column lineage; docs/cli.md)."""
    if ctx.remote is not None:
        data = ctx.remote.json("/api/v2/tags", {"dataset": dataset, "field": field_name, "tag": tag})
    else:
        data = tags_of(ctx.store, dataset, field_name, tag)
    if as_json:
        output.emit_json(data)
    else:
        output.print_tags(data)


@cli.command()
@click.option("--job", help="Only this job's runs (namespace/name, or a unique name).")
@click.option(
    "--state",
    "states",
    multiple=True,
    help="running, lost, failed, complete, aborted, start, other (repeatable; the inferred state).",
)
@click.option("--since", callback=_time, help="Runs with an event since then (ISO-8601 or 2h, 7d ago).")
@click.option("--limit", type=Count(), default=50, show_default=True)
@tag_option
@json_option
@pass_context
def runs(
    ctx: Context,
    job: str | None,
    states: Sequence[str],
    since: datetime | None,
    limit: int,
    tags: Sequence[str],
    as_json: bool,
) -> None:
    """Runs, newest first, with their reported and inferred (stuck = LOST) state."""
    if ctx.remote is not None:
        params = {"job": job, "state": list(states), "since": since, "limit": limit, "tag": list(tags)}
        listed = ctx.remote.json("/api/v2/runs", params)
    else:
        rows = ctx.store.runs(
            job=job, states=state_names(states), since=since, limit=limit, tags=[parse_tag(t) for t in tags]
        )
        listed = [run_json(r) for r in rows]
    if as_json:
        output.emit_json(listed)
    else:
        output.print_runs(listed)


@cli.command()
@click.argument("run_id")
@json_option
@pass_context
def run(ctx: Context, run_id: str, as_json: bool) -> None:
    """One run: state and liveness, timing, error, child runs and the datasets it read and wrote."""
    if ctx.remote is not None:
        data = ctx.remote.json(f"/api/v2/runs/{quote(run_id, safe='')}", {})
    else:
        data = run_detail(ctx.store, run_id)
    if as_json:
        output.emit_json(data)
    else:
        output.print_run(data)


@cli.command()
@click.argument("dataset")
@click.option(
    "--version",
    "version",
    help="One version (the producer's id, or the writing run's id or a unique prefix): show it and the "
    "versions upstream of it.",
)
@click.option(
    "--depth",
    type=click.IntRange(0, MAX_INT),
    default=DEFAULT_DEPTH,
    show_default=True,
    help="With --version: how many writes upstream to follow.",
)
@json_option
@pass_context
def versions(ctx: Context, dataset: str, version: str | None, depth: int, as_json: bool) -> None:
    """A dataset's versions (one per write), newest first, each with the run that wrote it; with
    --version, the chain of versions it was built from."""
    if ctx.remote is not None:
        params = {"node": dataset, "version": version, "depth": None if version is None else depth}
        data = ctx.remote.json("/api/v2/versions", params)
    elif version is None:
        data = versions_of(ctx.store, dataset)
    else:
        data = version_lineage(ctx.store, dataset, version, depth)
    if as_json:
        output.emit_json(data)
    elif version is None:
        output.print_versions(data)
    else:
        output.print_version_lineage(data)


@cli.command()
@click.argument("node", required=False)
@click.option("--from", "start", callback=_time, help="Start of the window looked at (default: a day ago).")
@click.option("--to", "end", callback=_time, help="Its end (default: now).")
@click.option(
    "--base-from",
    "base_start",
    callback=_time,
    help="Start of the window compared with (default: a week before the end of the base window).",
)
@click.option("--base-to", "base_end", callback=_time, help="Its end (default: the start of --from).")
@click.option("--depth", type=DEPTH, default=None, help="With NODE: hops around it (default: all).")
@click.option(
    "--limit",
    type=click.IntRange(min=0, max=MAX_INT),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Changes listed of each kind (all are counted; 0: the counts alone).",
)
@click.option("--all", "list_all", is_flag=True, help="List every change (no --limit).")
@click.option(
    "--graph",
    "graph_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the graph page of the changes listed instead (offline HTML: appeared green, stopped red).",
)
@json_option
@pass_context
def diff(
    ctx: Context,
    node: str | None,
    start: datetime | None,
    end: datetime | None,
    base_start: datetime | None,
    base_end: datetime | None,
    depth: int | None,
    limit: int,
    list_all: bool,
    graph_path: Path | None,
    as_json: bool,
) -> None:
    """What changed in the lineage between two windows (default: the last day against the week before),
    optionally around NODE: edges and column edges that appeared or stopped being observed, changed
    schemas, jobs that started or stopped writing a dataset, jobs whose last run outcome changed. Every
    change is counted; the first --limit of each kind are listed (--all: every one)."""
    listed = None if list_all else limit
    if ctx.remote is not None:
        params = {
            "from": start,
            "to": end,
            "base_from": base_start,
            "base_to": base_end,
            "node": node,
            "depth": depth,
            "limit": listed,
            "all": list_all or None,
            "format": "html" if graph_path is not None else None,
        }
        if graph_path is None:
            data = ctx.remote.json("/api/v2/diff", params)
            if as_json:
                output.emit_json(data)
            else:
                output.print_diff(data)
            return
        _write(graph_path, ctx.remote.text("/api/v2/diff", params))
        click.echo(f"wrote {graph_path} (the read API's page of the changes listed)")
        return
    base, current = windows(start, end, base_start, base_end)
    if graph_path is not None:
        from lineage.graph.render import render

        changes = changes_between(ctx.store, base, current, node=node, depth=depth, limit=listed)
        page = diff_graph(ctx.store, changes, node)
        _write(graph_path, render(page, "html"))
        note = "" if changes.complete else f"; the first {changes.limit} changes of each kind, --all for all"
        click.echo(
            f"wrote {graph_path} ({len(page['nodes'])} nodes, {len(page['edges'])} edges changed{note})"
        )
        return
    data = diff_of(ctx.store, base, current, node, depth, listed)
    if as_json:
        output.emit_json(data)
    else:
        output.print_diff(data)


@cli.command("close-run")
@click.argument("run_id")
@click.option("--state", type=click.Choice(["ABORT", "FAIL"], case_sensitive=False), required=True)
@click.option("--reason", help="Why (sent as the errorMessage facet).")
@click.option("--force", is_flag=True, help="Send even if the run already reported a terminal state.")
@json_option
@pass_context
def close_run(ctx: Context, run_id: str, state: str, reason: str | None, force: bool, as_json: bool) -> None:
    """Send a real OpenLineage ABORT/FAIL event for a stuck run through the configured transport.

    The raw event log stays the source of truth: the next build shows the run closed.
    """
    from lineage.cli.close import close_event
    from lineage.observe import send_now

    store = ctx.store
    row = store.run(run_id)
    if row["reported_state"] in TERMINAL_STATES and not force:
        raise LookupError_(
            f"run {row['run_id']} already reported {row['reported_state']}; use --force to send anyway"
        )
    event = close_event(row, state.upper(), reason)
    try:
        send_now(event, store.settings.own_lineage())
    except Exception as exc:
        raise SendFailed(f"could not send the {state.upper()} event: {exc}") from exc
    from openlineage.client.serde import Serde

    if as_json:
        sent = json.loads(Serde.to_json(event))
        output.emit_json({"run_id": row["run_id"], "state": state.upper(), "event": sent})
    else:
        output.echo(
            f"sent {state.upper()} for run {row['run_id']} ({row['job_namespace']}/{row['job_name']}); "
            "the next build shows it closed"
        )


@cli.command()
@click.argument("node")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="html", show_default=True)
@click.option(
    "-o", "--output", "path", type=click.Path(dir_okay=False, path_type=Path), help="File (default: stdout)."
)
@depth_option
@click.option("--direction", type=click.Choice([UPSTREAM, DOWNSTREAM, BOTH]), default=BOTH, show_default=True)
@as_of_option
@click.option("--columns", is_flag=True, help="Include column lineage (the html page always has it).")
@via_option
@granularity_option
@pass_context
def graph(
    ctx: Context,
    node: str,
    fmt: str,
    path: Path | None,
    depth: int,
    direction: str,
    as_of: datetime | None,
    columns: bool,
    via: str,
    granularity: str,
) -> None:
    """Draw the lineage around NODE: a self-contained offline HTML page, Graphviz dot, Mermaid or JSON."""
    if ctx.remote is not None:
        params = {
            "node": node,
            "format": fmt,
            "depth": depth,
            "direction": direction,
            "as_of": as_of,
            "columns": columns,
            "via": via,
            "granularity": granularity,
        }
        page = ctx.remote.text("/api/v2/graph", params)
        if path is None:
            click.echo(page, nl=not page.endswith("\n"))
        else:
            _write(path, page)
            click.echo(f"wrote {path} (the read API's {fmt})")
        return
    from lineage.graph.render import render

    store = ctx.store
    root = store.resolve(node)
    walk = store.traverse(
        root,
        direction,
        depth,
        as_of=as_of,
        columns=columns or fmt == "html",
        via=via,
        granularity=granularity,
    )
    text = render(graph_dict(store, walk), fmt)
    if path is None:
        click.echo(text, nl=not text.endswith("\n"))
        return
    _write(path, text)
    click.echo(f"wrote {path} ({len(walk.hops)} nodes, {len(walk.edges)} edges, {fmt})")


class SendFailed(Exception):
    """Sending an event or writing a file failed (exit 1)."""


def _write(path: Path, text: str) -> None:
    """``text`` into the file ``path`` (its folders made); a failure is :class:`SendFailed`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SendFailed(f"cannot write {path}: {exc.strerror or exc}") from exc


cli.add_command(sql_command)


# -- JSON shapes -------------------------------------------------------------------------------------------
@cli.group("serve", invoke_without_command=True)
@click.option("--host", help="Address to listen on (default serve.host: 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (default serve.port: 5000).")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    help="Processes sharing the port (default serve.workers: 1); more than one uses more cores.",
)
@click.pass_context
def serve_command(click_ctx: click.Context, host: str | None, port: int | None, workers: int | None) -> None:
    """Run the HTTP service: the intake (docs/intake.md) and the read API (docs/read-api.md).

    Intake: POST /api/v1/lineage (one event), POST /api/v1/lineage/batch (a JSON array) into the Kafka topic.
    Read API: Marquez-compatible GET /api/v1/... and /api/v2/... (the CLI's JSON) from lake.lineage.*.
    GET /healthz, GET /metrics. serve.intake / serve.read switch each half. Runs until SIGINT/SIGTERM.
    Without an API key configured it listens on loopback only.
    """
    if click_ctx.invoked_subcommand is not None:
        return
    import logging

    settings = click_ctx.find_object(Context).settings()  # type: ignore[union-attr]
    if workers is not None:
        settings = settings.model_copy(
            update={"serve": settings.serve.model_copy(update={"workers": workers})}
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from lineage.serve.app import ConfigurationError, WorkerFailed, serve

    try:
        serve(settings, host or settings.serve.host, settings.serve.port if port is None else port)
    except (ConfigurationError, WorkerFailed, OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


@serve_command.command("hash-key")
@click.option("--stdin", "from_stdin", is_flag=True, help="Hash the key read from standard input.")
def hash_key_command(from_stdin: bool) -> None:
    """Make an API key and its SHA-256 digest (or hash a key read from stdin).

    The key goes to the producer (Authorization: Bearer <key>); only the digest goes into the
    configuration (serve.api_key_hashes, or one line of serve.api_keys_file).
    """
    from lineage.serve.auth import hash_key, new_key

    if from_stdin:
        key = sys.stdin.readline().strip()
        if not key:
            raise click.ClickException("no key on standard input")
        click.echo(hash_key(key))
        return
    key = new_key()
    click.echo(f"api key (give it to the producer; it is not stored anywhere): {key}")
    click.echo(f"sha256  (put it in serve.api_key_hashes or serve.api_keys_file): {hash_key(key)}")


def credentials_hint(exc: BaseException) -> str | None:
    """What to do when ``exc`` (or an error it was raised from) is the object store refusing our credentials
    or finding none; None for any other error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _DENIED.search(str(current)):
            given = (
                "AWS_ACCESS_KEY_ID is set: wrong or expired keys?"
                if os.environ.get("AWS_ACCESS_KEY_ID")
                else "AWS_ACCESS_KEY_ID is not set"
            )
            return (
                f"the object store refused our credentials ({given}); clients read the AWS chain (AWS_* "
                f"variables, a profile, the machine's role); for the local stack: {CLUSTER_ENV}"
            )
        current = current.__cause__ or current.__context__
    return None


def _first_line(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()
    return first[0] if first else ""


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: one line on stderr and a non-zero exit for every expected failure."""
    try:
        args = list(argv) if argv is not None else None
        code = cli.main(args=args, prog_name="lineage", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except click.exceptions.Abort:
        click.echo("lineage: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except LookupError_ as exc:
        hint = credentials_hint(exc)
        output.echo(f"lineage: {exc}" + (f"; {hint}" if hint else ""), err=True)
        sys.exit(2)
    except (SendFailed, Unreachable) as exc:
        output.echo(f"lineage: {exc}", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(1)
    except Exception as exc:
        if os.environ.get("LINEAGE_DEBUG"):
            raise
        hint = credentials_hint(exc)
        if hint is not None:  # not unexpected: the question cannot be answered without the keys
            output.echo(f"lineage: {_first_line(exc)[:300].rstrip('. ')}; {hint}", err=True)
            sys.exit(2)
        click.echo(
            f"lineage: unexpected {type(exc).__name__}: {_first_line(exc)} "
            "(LINEAGE_DEBUG=1 shows the traceback)",
            err=True,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
