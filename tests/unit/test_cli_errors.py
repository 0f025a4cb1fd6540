"""The CLI's one-line errors for an object store that refuses our credentials or gets none."""

from __future__ import annotations

from typing import Any

import pytest

from lineage.cli import main as cli_main
from lineage.cli.main import CLUSTER_ENV, credentials_hint, main
from lineage.query.errors import LookupError_

# What pyarrow's S3 client says (seen on the local stack's S3Proxy without AWS_* variables).
DENIED = (
    "When reading information for key 'warehouse/lineage/runs/metadata/snap-1-0-a.avro' in bucket 'lake': "
    "AWS Error ACCESS_DENIED during HeadObject operation: No response body."
)


def test_the_object_store_refusing_our_credentials_gets_the_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    hint = credentials_hint(OSError(DENIED))
    assert hint is not None and CLUSTER_ENV in hint and "AWS_ACCESS_KEY_ID is not set" in hint
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "SOMEKEY")
    assert "wrong or expired keys" in str(credentials_hint(OSError("AWS Error InvalidAccessKeyId: ...")))
    for text in (
        "SignatureDoesNotMatch",
        "Unable to locate credentials",
        "AWS Error UNKNOWN (HTTP status 403)",
    ):
        assert credentials_hint(OSError(text)) is not None, text


def test_a_refusal_under_another_error_is_found_and_other_errors_get_no_hint() -> None:
    try:
        try:
            raise OSError(DENIED)
        except OSError as inner:
            raise LookupError_("cannot read lineage.runs: When reading information ...") from inner
    except LookupError_ as outer:
        assert credentials_hint(outer) is not None
    for other in (OSError("[Errno 111] Connection refused"), ValueError("bad"), PermissionError("denied")):
        assert credentials_hint(other) is None


class _DeniedStore:
    """A store whose every read is refused the way pyarrow's S3 client refuses it."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def __getattr__(self, name: str) -> Any:
        raise OSError(DENIED)


def test_the_cli_says_so_in_one_line_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("LINEAGE_DEBUG", raising=False)
    monkeypatch.setattr(cli_main, "LineageStore", _DeniedStore)
    with pytest.raises(SystemExit) as exited:
        main(["runs"])
    assert exited.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("lineage: When reading information for key ")
    assert "unexpected" not in lines[0] and lines[0].endswith(CLUSTER_ENV)
