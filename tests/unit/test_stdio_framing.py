"""A stdio backend's lines: an oversized one is never held, and its request gets an error in its place."""

from __future__ import annotations

from collections.abc import AsyncIterator

import mcp_types as types
import pytest

from agentify.backends.stdio_framing import Oversized, frames

pytestmark = pytest.mark.anyio


async def lines_of(chunks: list[bytes], limit: int) -> list[bytes | Oversized]:
    async def stream() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return [line async for line in frames(stream(), limit)]  # type: ignore[arg-type]


async def test_lines_split_across_reads_come_whole_and_a_long_one_is_oversized() -> None:
    long = b'{"jsonrpc":"2.0","id":7,"result":{"text":"' + b"x" * 500 + b'"}}'
    found = await lines_of([b'{"a":', b"1}\n", long[:100], long[100:] + b"\n{}", b"\n", b"tail"], limit=256)
    assert found[0] == b'{"a":1}' and found[2:] == [b"{}", b"tail"]
    oversized = found[1]
    assert isinstance(oversized, Oversized) and oversized.size == len(long)
    assert long.startswith(oversized.head) and long.endswith(oversized.tail)


@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"' + b"x" * 2000 + b'"}]}}', 7),  # Python order
        (b'{"result":{"content":[{"text":"' + b"x" * 2000 + b'","id":3}]},"jsonrpc":"2.0","id":"r-9"}', "r-9"),  # TS
    ],
)
async def test_an_oversized_answer_becomes_an_error_for_its_request(line: bytes, request_id: int | str) -> None:
    (oversized,) = await lines_of([line], limit=1 << 10)
    assert isinstance(oversized, Oversized)
    message = oversized.as_message()
    assert not isinstance(message, Exception)
    error = message.message
    assert isinstance(error, types.JSONRPCError) and error.id == request_id
    assert "over the 0.000976562 MiB limit; it was dropped" in error.error.message


async def test_an_oversized_request_or_notification_answers_nothing() -> None:
    for line in (
        b'{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{"x":"' + b"x" * 2000 + b'"}}',
        b'{"method":"notifications/progress","params":{"message":"' + b"x" * 2000 + b'"},"jsonrpc":"2.0"}',
    ):
        (oversized,) = await lines_of([line], limit=1024)
        assert isinstance(oversized, Oversized)
        assert isinstance(oversized.as_message(), ValueError)


@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"q":"' + b"x" * 2000 + b'"}}', 7),
        (b'{"method":"tools/call","params":{"q":"' + b"x" * 2000 + b'"},"jsonrpc":"2.0","id":"c-1"}', "c-1"),
        (b'{"jsonrpc":"2.0","id":3,"result":{"content":"' + b"x" * 2000 + b'"}}', None),  # the client's answer
        (b'{"result":{"content":"' + b"x" * 2000 + b'"},"jsonrpc":"2.0","id":3}', None),
        (b'{"method":"notifications/progress","params":{"m":"' + b"x" * 2000 + b'"},"jsonrpc":"2.0"}', None),
    ],
)
async def test_an_oversized_message_from_the_client_names_only_a_requests_id(
    line: bytes, request_id: int | str | None
) -> None:
    """The parse error answering it carries this id: a client's answer to the gateway's own request has an id
    from the gateway's side, which the client would take for one of its own requests."""
    (oversized,) = await lines_of([line], limit=1 << 10)
    assert isinstance(oversized, Oversized) and oversized.request_id() == request_id
