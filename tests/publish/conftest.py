"""Fixtures: dummy AWS credentials, a real local CloudWatch-compatible server (moto), run folders, a fake sink.

The moto server runs once per session on 127.0.0.1 and a free port; each test that uses it starts from an
empty backend (``/moto-api/reset``).

A ``KeyboardInterrupt`` that the publisher raises by itself, with no Ctrl-C pressed, fails the test that met it:
left alone it would end the whole session as interrupted (exit 2), which reads as no test failing.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.cwfakes import REGION, FakeSink
from spectrn.runtimes.launch import free_port


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    except KeyboardInterrupt as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None and Path(tb.tb_frame.f_code.co_filename).parts[-3:] == ("spectrn", "publish", "publisher.py"):
            raise AssertionError(f"{item.name}: the publish stopped as if Ctrl-C had been pressed") from e
        raise


_AWS_VARS_TO_CLEAR = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_CLOUDWATCH",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_REGION",
)


def _isolate_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in _AWS_VARS_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy credentials and a region, nothing from the machine's own AWS setup."""
    _isolate_aws(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture
def no_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials anywhere botocore looks (instance metadata disabled so nothing waits on the network)."""
    _isolate_aws(monkeypatch, tmp_path)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    yield url
    server.stop()


@pytest.fixture
def moto_url(moto_server: str, aws_env: None) -> str:
    req = urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST")
    urllib.request.urlopen(req, timeout=10).close()
    return moto_server


@pytest.fixture
def cw_client(moto_url: str) -> Any:
    import boto3

    return boto3.client("cloudwatch", region_name=REGION, endpoint_url=moto_url)


@pytest.fixture
def fake_sink() -> FakeSink:
    return FakeSink()
