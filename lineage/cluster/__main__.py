"""``python -m lineage.cluster start|stop|status|env|package|submit``.

start/stop/status   the local stack of ``[local_cluster]`` (S3Proxy, REST catalog, Spark master + workers,
                    history server)
env                 the local object store's keys as ``export AWS_...`` lines, for
                    ``eval "$(python -m lineage.cluster env)"``
package             build the wheel shipped with --py-files (into ``<data_dir>/dist``), print its path
submit JOB [ARGS]   spark-submit ``ingest`` or ``build`` to ``spark.master`` with our package and jars; the
                    command is printed first. Settings: ``LINEAGE_CONFIG`` (e.g. conf/cluster.toml).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import subprocess
import sys
from pathlib import Path

from lineage.cluster.stack import LocalStack, StackError
from lineage.cluster.submit import JOBS, build_package, package_is_stale, submit_command, submit_env
from lineage.settings import load_settings


def _package(stack: LocalStack, given: Path | None) -> Path:
    if given is not None:
        return given
    dist = stack.root / "dist"
    existing = sorted(dist.glob("*.zip"))
    if existing and not package_is_stale(existing[-1]):
        return existing[-1]
    for old in existing:
        old.unlink()
    return build_package(dist)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lineage.cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("start", "stop", "status", "env", "package"):
        commands.add_parser(name)
    submit = commands.add_parser("submit", help="spark-submit one of our jobs")
    submit.add_argument("job", choices=sorted(JOBS))
    submit.add_argument("--py-files", type=Path, help="the package zip (default: built when stale)")
    submit.add_argument("job_args", nargs=argparse.REMAINDER, help="arguments of the job (after --)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    settings = load_settings()
    stack = LocalStack(settings.local_cluster)
    try:
        if args.command == "start":
            stack.start()
            for name, pid, address in stack.status():
                print(f"  {name:<10} pid {pid}  {address}")
            print(f"  Spark master UI {stack.master_ui}, history server {stack.history_url}")
            print(f'credentials for clients: eval "$({Path(sys.executable).name} -m lineage.cluster env)"')
        elif args.command == "stop":
            stack.stop()
            print("stack stopped (data kept in " + str(stack.root) + ")")
        elif args.command == "status":
            states = stack.status()
            for name, pid, address in states:
                print(f"  {name:<10} {'pid ' + str(pid) if pid else 'not running':<14} {address}")
            return 0 if all(pid for _, pid, _ in states) else 1
        elif args.command == "env":
            if not stack.credentials_file.is_file():
                print(
                    f"no credentials yet in {stack.credentials_file}: start the stack first", file=sys.stderr
                )
                return 1
            for key, value in stack.credentials().env().items():
                print(f"export {key}={shlex.quote(value)}")
        elif args.command == "package":
            print(_package(stack, None))
        else:
            job_args = args.job_args[1:] if args.job_args[:1] == ["--"] else args.job_args
            command = submit_command(settings, args.job, job_args, py_files=_package(stack, args.py_files))
            print("+ " + shlex.join(command), flush=True)
            return subprocess.call(command, env=submit_env())
    except (StackError, FileNotFoundError, ValueError) as exc:
        print(f"lineage.cluster: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
