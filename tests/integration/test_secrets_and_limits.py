"""Values from ${VAR} are secrets everywhere, and a huge selection neither freezes the gateway nor
bloats its traces."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import anyio
import pytest

from tests.conftest import AGENTIFY, fake_backend, gateway, gateway_env, text_of, write_config
from tests.fakes.model_server import ModelServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

PLAIN_SECRET = "plainword"  # no secret shape at all: only knowing where it came from masks it


async def test_a_variable_in_args_is_masked_in_logs_traces_results_list_backends_and_doctor(
    tmp_path: Path, model: ModelServer
) -> None:
    config = write_config(
        tmp_path,
        [fake_backend("fake", "--marker", str(tmp_path / "m-${GH_TOKEN}.log"), env={"NODE_ENV": "production"})],
        traceFile="traces.jsonl",
    )
    env = gateway_env(model, GH_TOKEN=PLAIN_SECRET)
    stderr = tmp_path / "stderr.log"
    async with gateway(config, env, stderr) as session:
        model.push(Reply.tool_call("fake__echo", {"text": f"the word {PLAIN_SECRET} echoed in production"}))
        echoed = await session.call_tool("orchestrate_task", {"query": "echo it"})
        backends = await session.call_tool("list_backends", {})
    assert (tmp_path / f"m-{PLAIN_SECRET}.log").exists()  # the backend got the real value
    assert "[REDACTED]" in text_of(echoed) and PLAIN_SECRET not in text_of(echoed)
    assert PLAIN_SECRET not in text_of(backends) + json.dumps(backends.structured_content)
    log = stderr.read_text()
    assert "starting (stdio)" in log and PLAIN_SECRET not in log
    # An ordinary env value is no secret: the word stays readable in the log and the result.
    assert "echoed in production" in log and text_of(echoed).endswith("echoed in production")
    trace_file = tmp_path / "traces.jsonl"  # relative to the config file's folder
    assert trace_file.exists() and PLAIN_SECRET not in trace_file.read_text()
    assert stat.S_IMODE(trace_file.stat().st_mode) == 0o600
    with anyio.fail_after(120):
        doctor = await anyio.run_process(
            [str(AGENTIFY), "doctor", "--config", str(config)], env=os.environ | env, check=False
        )
    assert PLAIN_SECRET not in doctor.stdout.decode() + doctor.stderr.decode()


async def test_a_huge_selection_is_cut_and_the_gateway_stays_responsive(tmp_path: Path, model: ModelServer) -> None:
    config = write_config(tmp_path, [fake_backend("fake")], traceFile=str(tmp_path / "traces.jsonl"))
    selection = "selection" * 120_000  # 1 MB of letters: the old redactor took minutes of one core on it
    async with gateway(config, gateway_env(model), tmp_path / "stderr.log") as session:
        for _ in range(5):
            model.push(Reply.tool_call("fake__echo", {"text": "ok"}))
            with anyio.fail_after(60):
                result = await session.call_tool(
                    "orchestrate_task", {"query": "echo ok", "context": {"selectionText": selection}}
                )
            assert text_of(result) == "echo: ok"
        request = model.requests[-1]
    sent = json.dumps(request)
    assert len(sent) < 200_000  # the model is shown a part of the cut selection, not 5 MB
    hidden = re.search(r"\[\.\.\. (\d+) more characters of the selection", sent)
    assert hidden is not None and int(hidden.group(1)) < 20_000  # cut at maxContextChars before planning
    assert (tmp_path / "traces.jsonl").stat().st_size < 100_000  # 5 traces of bounded previews
