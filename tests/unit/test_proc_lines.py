from __future__ import annotations

import anyio
import pytest

from agentify._common.proc import iter_lines

pytestmark = pytest.mark.anyio


class Chunks:
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    def __aiter__(self) -> Chunks:
        return self

    async def __anext__(self) -> bytes:
        await anyio.lowlevel.checkpoint()
        if not self._chunks:
            raise StopAsyncIteration
        return self._chunks.pop(0)


async def collect(chunks: list[bytes], limit: int | None = None) -> list[bytes]:
    return [line async for line in iter_lines(Chunks(chunks), limit)]  # type: ignore[arg-type]


async def test_lines_split_across_chunks_and_keep_the_tail() -> None:
    assert await collect([b"ab", b"c\nde", b"f\n\ng"]) == [b"abc", b"def", b"", b"g"]


async def test_long_lines_are_cut_at_the_limit() -> None:
    lines = await collect([b"x" * 10, b"x" * 10, b"\nok\n"], limit=8)
    assert lines == [b"x" * 8, b"ok"]


def test_a_backends_error_line_is_shown_rather_than_the_end_of_its_stack_dump() -> None:
    from agentify.backends.stderr_log import StderrLog

    stderr = StderrLog("b")
    for line in [
        "node:internal/modules/cjs/loader:1228",
        "  throw err;",
        "Error: Cannot find module '/p/.cursor/server.js'",
        "    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)",
        "  requireStack: []",
        "}",
        "Node.js v20.19.2",
    ]:
        stderr.line(line)
    assert stderr.hint() == "Its stderr says: Error: Cannot find module '/p/.cursor/server.js'"
    quiet = StderrLog("c")
    quiet.line("starting")
    quiet.line("listening")
    assert quiet.hint() == "Last stderr: starting / listening"
