"""How our clients authenticate to an Iceberg REST catalog (docs/deployment.md, "Authenticating the REST
catalog"): ``[catalog.properties]`` ``credential`` / ``token`` / ``oauth2-server-uri`` / ``scope`` reach
pyiceberg (CLI, lease, preflight, read service) and Spark's SparkCatalog unchanged.

pyiceberg runs for real against a small HTTP server of the test that records what it is sent and answers
as a REST catalog with an OAuth2 token endpoint would (no authenticating catalog server installs here).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from lineage.io.preflight import check_settings
from lineage.settings import Settings, load_settings
from lineage.spark import catalog_conf, read_defaults_file

REPO = Path(__file__).resolve().parents[2]
ISSUED = "token-from-the-identity-provider"


class _Catalog(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]]

    def _answer(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        request = {
            "method": self.command,
            "path": self.path.split("?", 1)[0],
            "authorization": self.headers.get("Authorization"),
            "form": parse_qs(self.rfile.read(length).decode()) if length else {},
        }
        self.seen.append(request)
        return request

    def do_POST(self) -> None:
        self._record()
        self._answer(
            {
                "access_token": ISSUED,
                "token_type": "bearer",
                "expires_in": 3600,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            }
        )

    def do_GET(self) -> None:
        request = self._record()
        self._answer({"namespaces": []} if request["path"].endswith("/namespaces") else {"defaults": {}})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def catalog_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    handler = type("Handler", (_Catalog,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def rest_settings(uri: str, **auth: str) -> Settings:
    return load_settings(catalog={"properties": {"type": "rest", "uri": uri, **auth}})


def test_client_credentials_are_exchanged_for_a_bearer_token(
    catalog_server: tuple[str, list[dict[str, Any]]],
) -> None:
    uri, seen = catalog_server
    settings = rest_settings(
        uri, credential="lineage-jobs:s3cr3t", **{"oauth2-server-uri": f"{uri}/idp/token", "scope": "catalog"}
    )
    check_settings(settings, checkpoint=False)  # the jobs' preflight lists the namespaces through it
    token = [r for r in seen if r["method"] == "POST"]
    assert token and {r["path"] for r in token} == {"/idp/token"}  # never the catalog's deprecated one
    form = token[0]["form"]
    assert form["grant_type"] == ["client_credentials"] and form["scope"] == ["catalog"]
    basic = token[0]["authorization"]  # the client id and secret, in the form or as HTTP Basic
    assert form.get("client_secret") == ["s3cr3t"] or (basic or "").startswith("Basic ")
    catalog_calls = [r for r in seen if r["method"] == "GET"]
    assert catalog_calls and {r["authorization"] for r in catalog_calls} == {f"Bearer {ISSUED}"}


def test_a_given_token_is_sent_as_is(catalog_server: tuple[str, list[dict[str, Any]]]) -> None:
    uri, seen = catalog_server
    check_settings(rest_settings(uri, token="a-token-from-the-secret-store"), checkpoint=False)
    assert {r["authorization"] for r in seen} == {"Bearer a-token-from-the-secret-store"}
    assert all(r["method"] == "GET" for r in seen)  # no token request


def test_spark_gets_the_same_properties_and_keeps_the_credential_out_of_its_ui_and_event_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LINEAGE__CATALOG__PROPERTIES__CREDENTIAL", "lineage-jobs:s3cr3t")
    monkeypatch.setenv("LINEAGE_CONFIG", str(REPO / "conf" / "examples" / "catalogs" / "rest-oauth2.toml"))
    monkeypatch.chdir(REPO)
    settings = load_settings()
    conf = catalog_conf(settings.catalog)
    prefix = f"spark.sql.catalog.{settings.catalog.name}"
    assert conf[f"{prefix}.credential"] == "lineage-jobs:s3cr3t"
    assert conf[f"{prefix}.oauth2-server-uri"] == "https://idp.example.com/oauth2/token"
    # Spark redacts the values of properties whose names match spark.redaction.regex; its default
    # ((?i)secret|password|token|access[.]?key) misses "credential": conf/spark-defaults.conf widens it.
    redaction = read_defaults_file(REPO / "conf" / "spark-defaults.conf")["spark.redaction.regex"]
    for key in (f"{prefix}.credential", f"{prefix}.token", "spark.authenticate.secret"):
        assert re.search(redaction, key), key
