"""`spectrn bench` through the CLI against local servers: exit codes and what reaches the terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web

from doubles.replay import replay_app, serve_app
from spectrn.cli.main import main
from spectrn.run.summary import Summary


def test_every_request_failing_is_a_failed_run_with_the_servers_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {
        "error": {
            "message": "max_tokens=5000 cannot be greater than max_model_len=2048",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }

    async def reject(req: web.Request) -> web.Response:
        await req.read()
        return web.json_response(body, status=400)

    with serve_app(replay_app(reject)) as a, serve_app(replay_app(reject)) as b:
        with pytest.raises(SystemExit) as e:
            main(
                [
                    "bench",
                    "--endpoint",
                    f"baseline={a}",
                    "--endpoint",
                    f"speculative={b}",
                    "--requests",
                    "3",
                    "--run-id",
                    "bad",
                    "--out-dir",
                    str(tmp_path),
                    "--no-report",
                ]
            )
    assert e.value.code == 4
    err = capsys.readouterr().err
    assert "no successful request on baseline, speculative" in err
    assert "max_tokens=5000 cannot be greater than max_model_len=2048" in err
    s = Summary.model_validate_json((tmp_path / "bad" / "summary.json").read_text())
    assert s.clean is False
    assert s.levels[0].variants["baseline"].requests.error_classes == {"http_400": 3}
