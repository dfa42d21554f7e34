"""The audit chain on real files: what `AuditLog` writes, and what `agentify audit verify` says of it
(edited, removed and reordered lines, rotations, restarts, a second writer)."""

from __future__ import annotations

import hashlib
import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentify._common.canonical_json import canonical
from agentify._common.errors import StartFailed
from agentify.cli.main import main
from agentify.config.server import AuditConfig
from agentify.team.audit import GENESIS, AuditLog, installed, trust_changed
from agentify.team.operations import NO_ARGUMENTS, Operation

SECRET_VALUE = "the-value-only-the-caller-knows-1234"


def operation(n: int, arguments: Any = None, **fields: Any) -> Operation:
    values: dict[str, Any] = {
        "time": time.time(),
        "method": "tools/call",
        "principal": "alice" if n % 2 else "bob",
        "client": "test/1",
        "operation": "call_tool",
        "target": "fake__echo",
        "arguments": {"name": "fake__echo", "arguments": {"text": f"{SECRET_VALUE} {n}"}}
        if arguments is None
        else arguments,
        "decision": "allowed",
        "outcome": "ok",
        "duration_ms": 1.5,
        "trace_id": f"{n:032x}",
    }
    return Operation(**(values | fields))


@pytest.fixture
def written(tmp_path: Path) -> Iterator[Any]:
    logs: list[AuditLog] = []

    def write(count: int, file: str = "audit.jsonl", start: int = 0, **config: Any) -> AuditLog:
        log = AuditLog(AuditConfig(file=str(tmp_path / file), **config), "r1")
        log.open()
        logs.append(log)
        for n in range(start, start + count):
            log.operation(operation(n))
        log.close()
        return log

    yield write
    for log in logs:
        log.close()


def verify(*paths: Path) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["audit", "verify", *map(str, paths)])
    return code, out.getvalue(), err.getvalue()


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_each_line_holds_the_hash_of_the_one_before_and_never_an_argument_value(tmp_path: Path, written: Any) -> None:
    written(4)
    path = tmp_path / "audit.jsonl"
    lines = lines_of(path)
    records = [json.loads(line) for line in lines]
    assert [r["prev"] for r in records] == [GENESIS] + [hashlib.sha256(line).hexdigest() for line in lines[:-1]]
    fields = "time replica principal client operation target argsSha256 decision outcome durationMs traceId prev"
    assert list(records[0]) == fields.split()
    arguments = {"name": "fake__echo", "arguments": {"text": f"{SECRET_VALUE} 0"}}
    assert records[0]["argsSha256"] == hashlib.sha256(canonical(arguments)).hexdigest()
    assert records[0]["replica"] == "r1" and records[0]["time"].endswith("Z")
    assert SECRET_VALUE not in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert verify(path)[0] == 0


def test_an_existing_file_readable_by_others_is_tightened(tmp_path: Path, written: Any) -> None:
    path = tmp_path / "audit.jsonl"
    path.touch(mode=0o644)
    path.chmod(0o644)
    written(1)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("tamper", "broken_line"),
    [
        (lambda lines: [lines[0], lines[1].replace(b'"ok"', b'"no"'), *lines[2:]], 3),  # edited
        (lambda lines: [lines[0], *lines[2:]], 2),  # removed
        (lambda lines: [lines[0], lines[2], lines[1], *lines[3:]], 2),  # reordered
    ],
    ids=["edited", "removed", "reordered"],
)
def test_verify_names_the_first_line_whose_prev_does_not_match(
    tmp_path: Path, written: Any, tamper: Any, broken_line: int
) -> None:
    written(5)
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"\n".join(tamper(lines_of(path))) + b"\n")
    code, out, err = verify(path)
    assert code == 1 and out == ""
    assert f"the chain breaks at {path}:{broken_line}:" in err
    assert "was edited, removed or moved" in err


def test_the_chain_goes_on_across_rotations_and_restarts(tmp_path: Path, written: Any) -> None:
    written(30, max_bytes=4096, keep=3)
    written(30, start=30, max_bytes=4096, keep=3)  # a restart continues the chain of the file it finds
    path = tmp_path / "audit.jsonl"
    rotated = sorted(tmp_path.glob("audit.jsonl.*[0-9]"))
    assert [p.name for p in rotated] == ["audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.3"]
    assert all(p.stat().st_size <= 4096 for p in [path, *rotated])
    code, out, _ = verify(path, *rotated)  # in any order: FILE.N before FILE, the highest first
    assert code == 0 and "the chain holds" in out and "in 4 files" in out
    assert "older file not given" in out  # the oldest rotations were removed (keep 3)
    first = json.loads(lines_of(path)[0])
    assert first["prev"] == hashlib.sha256(lines_of(rotated[0])[-1]).hexdigest()
    code, _, err = verify(path, rotated[1])  # a rotated file left out breaks the chain where it was
    assert code == 1 and f"{path}:1:" in err


def test_a_second_writer_of_the_same_file_is_refused(tmp_path: Path) -> None:
    first = AuditLog(AuditConfig(file=str(tmp_path / "audit-{replica}.jsonl")), "r1")
    first.open()
    try:
        with pytest.raises(StartFailed, match=r"another agentify process.*\{replica\}"):
            AuditLog(AuditConfig(file=str(tmp_path / "audit-{replica}.jsonl")), "r1").open()
        other = AuditLog(AuditConfig(file=str(tmp_path / "audit-{replica}.jsonl")), "r2")
        other.open()  # another replica's id: its own file
        other.close()
    finally:
        first.close()
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == ["audit-r1.jsonl", "audit-r2.jsonl"]


def test_a_torn_last_line_is_cut_and_the_chain_goes_on_from_the_line_before(tmp_path: Path, written: Any) -> None:
    written(2)
    path = tmp_path / "audit.jsonl"
    with path.open("ab") as handle:
        handle.write(b'{"time":"2026-')
    assert verify(path)[0] == 1
    written(1, start=2)
    assert verify(path)[0] == 0 and len(lines_of(path)) == 3


def test_a_change_of_trust_is_a_line_with_its_details_hashed(tmp_path: Path) -> None:
    log = AuditLog(AuditConfig(file=str(tmp_path / "audit.jsonl")), "r1")
    log.open()
    trust_changed("access_reloaded", "server.access")  # no audit installed: nothing, no error
    with installed(log):
        trust_changed("access_reloaded", "server.access", {"rules": [{"principals": ["*"], "allow": ["fake"]}]})
        trust_changed("pins_approved", "fake__echo")
    log.close()
    records = [json.loads(line) for line in lines_of(tmp_path / "audit.jsonl")]
    assert [(r["operation"], r["target"], r["principal"]) for r in records] == [
        ("access_reloaded", "server.access", "agentify"),
        ("pins_approved", "fake__echo", "agentify"),
    ]
    assert records[0]["argsSha256"] and records[1]["argsSha256"] is None


def test_no_argument_operations_and_secrets_in_targets(tmp_path: Path) -> None:
    log = AuditLog(AuditConfig(file=str(tmp_path / "audit.jsonl")), "r1", mask=lambda t: t.replace("s3cr3t", "***"))
    log.open()
    log.operation(operation(1, NO_ARGUMENTS, method="resources/read", operation="resources/read", target="x://s3cr3t"))
    log.close()
    record = json.loads(lines_of(tmp_path / "audit.jsonl")[0])
    assert record["argsSha256"] is None and record["target"] == "x://***"


def test_verify_says_what_it_could_not_read(tmp_path: Path) -> None:
    code, _, err = verify(tmp_path / "missing.jsonl")
    assert code == 1 and f"cannot read {tmp_path / 'missing.jsonl'}" in err and "nothing was verified" in err
    (tmp_path / "junk.jsonl").write_text("not json\n")
    code, _, err = verify(tmp_path / "junk.jsonl")
    assert code == 1 and "junk.jsonl:1: not an audit record" in err
