"""Stopping with a signal, as IDEs and terminals do: `serve` ends with every backend and child gone
while its stdin is still open; `run`, `doctor` and `eval` say "interrupted" and exit 130.

The limits here are generous on purpose: how fast it stops is measured by scripts/bench.py.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.conftest import AGENTIFY, fake_backend, fs_backend, gateway_env, group_alive, pid_alive, write_config
from tests.fakes.model_server import ModelServer, Reply

pytestmark = pytest.mark.integration

LIMIT = 20.0
PROMPT = 3.0
"""A stop asked for by a signal ends within this (the gateway itself takes well under a second; a hang
waited for stdin forever, or 12 s for its watchdog)."""
STDOUTS = ["pipe", "file", "devnull", "terminal"]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}


def wait_for(predicate: Callable[[], bool], what: str, seconds: float = LIMIT) -> None:
    """Polls another process's state (no event crosses the process boundary), bounded."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {seconds} s waiting for {what}")
        time.sleep(0.05)


@contextmanager
def spawn(args: list[str], env: dict[str, str], stderr: Path, stdout: str = "pipe") -> Iterator[subprocess.Popen[str]]:
    """agentify in its own process group, stdin kept open (an IDE closes it only at the very end).

    `stdout`: "pipe" (as IDEs start it), "file", "devnull" or "terminal" (a pseudo-terminal, as in a shell);
    on all but a pipe the gateway serves through the SDK's threaded transport."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTIFY_"))}
    with ExitStack() as stack:
        errors = stack.enter_context(stderr.open("w"))
        if stdout == "terminal":
            terminal, target = pty.openpty()
            stack.callback(os.close, terminal)
            stack.callback(os.close, target)
        elif stdout == "file":
            target = stack.enter_context((stderr.parent / "stdout.out").open("w")).fileno()
        else:
            target = subprocess.PIPE if stdout == "pipe" else subprocess.DEVNULL
        process = subprocess.Popen(
            [str(AGENTIFY), *args],
            env=base | env,
            stdin=subprocess.PIPE,
            stdout=target,
            stderr=errors,
            text=True,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=LIMIT)


def children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while we looked
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def marker_pids(marker: Path) -> list[int]:
    """The fake backend's pid and its child's, as it recorded them."""
    return [int(line.split()[1]) for line in marker.read_text().splitlines() if line.startswith(("started ", "child "))]


def assert_nothing_left(gateway: subprocess.Popen[str], backends: list[int], others: list[int]) -> None:
    """No backend, no child of one, nothing of any backend's process group, nothing of the gateway's."""
    pids = [*backends, *others]
    wait_for(lambda: not any(pid_alive(p) for p in pids), f"the processes {pids} to end")
    wait_for(lambda: not any(group_alive(p) for p in [*backends, gateway.pid]), "every process group to end")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_stops_on_a_signal_with_stdin_open_and_leaves_no_process(
    tmp_path: Path, workspace: Path, model: ModelServer, signum: int
) -> None:
    marker = tmp_path / "marker.log"
    config = write_config(
        tmp_path, [fake_backend("fake", "--marker", str(marker), "--spawn-child"), fs_backend(workspace)]
    )
    stderr = tmp_path / "stderr.log"
    with spawn(["serve", "--config", str(config)], gateway_env(model), stderr) as gateway:
        assert gateway.stdin is not None
        gateway.stdin.write(json.dumps(INITIALIZE) + "\n")  # what an IDE sends first; backends start with it
        gateway.stdin.flush()
        wait_for(lambda: marker.exists() and "child" in marker.read_text(), "the fake backend and its child")
        wait_for(lambda: stderr.read_text().count("ready:") == 2, "both backends to be ready")
        backends = children(gateway.pid)
        others = [p for p in marker_pids(marker) if p not in backends]
        gateway.send_signal(signum)
        code = gateway.wait(timeout=LIMIT)
        output = gateway.stdout.read() if gateway.stdout else ""
    assert code == 0
    (reply,) = [json.loads(line) for line in output.splitlines()]  # stdout is the MCP wire: nothing but protocol
    assert reply["id"] == 1 and "result" in reply
    assert "Traceback" not in stderr.read_text()
    assert len(backends) == 2 and len(others) == 1
    assert_nothing_left(gateway, backends, others)


def test_run_interrupted_during_a_call_says_so_and_exits_130(tmp_path: Path, model: ModelServer) -> None:
    marker = tmp_path / "marker.log"
    model.push(Reply.tool_call("fake__slow", {"seconds": 600}))
    config = write_config(tmp_path, [fake_backend("fake", "--marker", str(marker), "--spawn-child")])
    stderr = tmp_path / "stderr.log"
    with spawn(["run", "wait ten minutes", "--config", str(config)], gateway_env(model), stderr) as run:
        wait_for(lambda: "plan: fake.slow" in stderr.read_text(), "the slow call to start")
        backends = children(run.pid)
        others = [p for p in marker_pids(marker) if p not in backends]
        run.send_signal(signal.SIGINT)
        code = run.wait(timeout=LIMIT)
        output = run.stdout.read() if run.stdout else ""
    log = stderr.read_text()
    assert code == 130
    assert log.rstrip().endswith("agentify run: interrupted")
    assert output == "" and "Traceback" not in log
    assert "cancelled slow" in marker.read_text()  # the backend's call was cancelled, not abandoned
    assert len(backends) == 1 and len(others) == 1
    assert_nothing_left(run, backends, others)


@pytest.mark.parametrize("command", ["doctor", "eval"])
def test_doctor_and_eval_interrupted_say_so_and_exit_130(tmp_path: Path, command: str) -> None:
    config = write_config(tmp_path, [fake_backend("stuck", "--hang-initialize", startupTimeoutSeconds=600)])
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"query": "echo hi", "expect": {"backend": "stuck", "tool": "echo"}}) + "\n")
    args = [command, "--config", str(config)] + ([str(cases)] if command == "eval" else [])
    stderr = tmp_path / "stderr.log"
    with spawn(args, gateway_env(None), stderr) as process:
        wait_for(lambda: "fake backend starting" in stderr.read_text(), "the backend to start")
        backends = children(process.pid)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=LIMIT)
    log = stderr.read_text()
    assert code == 130
    assert log.rstrip().endswith(f"agentify {command}: interrupted")
    assert "Traceback" not in log
    assert len(backends) == 1
    assert_nothing_left(process, backends, [])


def send(gateway: subprocess.Popen[str], *messages: dict[str, object]) -> None:
    assert gateway.stdin is not None
    for message in messages:
        gateway.stdin.write(json.dumps(message) + "\n")
    gateway.stdin.flush()


def stopped_promptly(gateway: subprocess.Popen[str], signum: int) -> int:
    """Signals the gateway and returns its exit code, failing if it is still running `PROMPT` s later."""
    gateway.send_signal(signum)
    try:
        return gateway.wait(timeout=PROMPT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {PROMPT:g} s after {signal.Signals(signum).name}")


@pytest.mark.parametrize("stdout", STDOUTS)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_signalled_before_its_client_speaks_exits_at_once(tmp_path: Path, stdout: str, signum: int) -> None:
    marker = tmp_path / "marker.log"
    config = write_config(tmp_path, [fake_backend("fake", "--marker", str(marker))])
    stderr = tmp_path / "stderr.log"
    with spawn(["serve", "--config", str(config)], gateway_env(None), stderr, stdout) as gateway:
        wait_for(lambda: "serving MCP on stdio" in stderr.read_text(), "the gateway to serve")
        code = stopped_promptly(gateway, signum)
    assert code == 0, stderr.read_text()[-2000:]
    assert not marker.exists()  # nobody spoke: no backend was started
    assert "Traceback" not in stderr.read_text()


@pytest.mark.parametrize("stdout", ["pipe", "terminal"])
@pytest.mark.parametrize("state", ["backends starting", "during a call"])
def test_serve_signalled_while_serving_stops_at_once_and_leaves_no_process(
    tmp_path: Path, stdout: str, state: str
) -> None:
    marker = tmp_path / "marker.log"
    flags = ("--hang-initialize",) if state == "backends starting" else ()
    config = write_config(tmp_path, [fake_backend("fake", "--marker", str(marker), *flags, startupTimeoutSeconds=600)])
    stderr = tmp_path / "stderr.log"
    call = {"name": "call_tool", "arguments": {"name": "fake__slow", "arguments": {"seconds": 600}}}
    with spawn(["serve", "--config", str(config)], gateway_env(None), stderr, stdout) as gateway:
        send(gateway, INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        if state == "during a call":
            send(gateway, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
            wait_for(lambda: marker.exists() and "slow 600" in marker.read_text(), "the slow call to start")
        else:
            wait_for(lambda: "fake backend starting" in stderr.read_text(), "the backend to start")
        backends = children(gateway.pid)
        code = stopped_promptly(gateway, signal.SIGTERM)
    assert code == 0, stderr.read_text()[-2000:]
    assert len(backends) == 1
    assert_nothing_left(gateway, backends, [])
    if state == "during a call":
        assert "cancelled slow" in marker.read_text()  # the backend's call was cancelled, not abandoned
