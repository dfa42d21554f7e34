"""How `scripts/team.sh` starts: ports no outgoing connection can take before their process binds them, and a
start that fails naming the process that exited, with the end of its log, its logs kept."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.conftest import AGENTIFY, fake_backend, gateway_env
from tests.integration.cluster import TEAM_SH, alive, team

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def _environment(tmp_path: Path) -> dict[str, str]:
    dirs = {"AGENTIFY_CACHE_DIR": str(tmp_path / "cache"), "AGENTIFY_STATE_DIR": str(tmp_path / "state")}
    token = {"AGENTIFY_HTTP_TOKEN": "team-start-token-0123456789"}
    return os.environ | gateway_env(None, AGENTIFY_BIN=str(AGENTIFY), **dirs, **token)


async def test_the_ports_team_sh_chooses_are_outside_the_range_outgoing_connections_take_theirs_from(
    tmp_path: Path,
) -> None:
    config = tmp_path / "agentify.json"
    config.write_text(json.dumps({"backends": [fake_backend()], "planner": {"provider": "offline"}}))
    async with team(config, tmp_path / "logs", replicas=2, env={"AGENTIFY_HTTP_TOKEN": "team-start-0123456789"}) as t:
        said = t.log()
    ports = [int(port) for port in re.findall(r"team: (?:redis|replica \d+) at \w+://127\.0\.0\.1:(\d+)", said)]
    low, high = map(int, (await anyio.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()).split())
    assert len(ports) == 3, said  # Redis and two replicas
    assert not [port for port in ports if low <= port <= high], (ports, low, high)


async def test_a_replica_that_exits_while_starting_is_named_with_the_end_of_its_log(tmp_path: Path) -> None:
    config = tmp_path / "agentify.json"
    server = {"audit": {"file": "/proc/no-such-folder/audit.jsonl"}}  # a file no one can create
    config.write_text(json.dumps({"backends": [fake_backend()], "planner": {"provider": "offline"}, "server": server}))
    logs = tmp_path / "logs"
    command = ["bash", str(TEAM_SH), "--replicas", "1", "--port", "0", "--config", str(config), "--logs", str(logs)]
    with anyio.fail_after(280):
        done = await anyio.run_process(command, env=_environment(tmp_path), check=False, stdin=subprocess.DEVNULL)
    said = done.stderr.decode()
    assert done.returncode == 1 and b"ready at" not in done.stdout, said
    [pid] = re.findall(r"team: replica 1 \(pid (\d+)\) exited while starting", said)
    assert "cannot write the audit file" in said.split("exited while starting", 1)[1]  # the end of its own log
    assert "cannot write the audit file" in await anyio.Path(logs / "replica-1.log").read_text()  # kept
    assert not alive(int(pid))
    for started in re.findall(r"team: (?:redis|haproxy) at \S+ pid (\d+)", said):
        assert not alive(int(started))
