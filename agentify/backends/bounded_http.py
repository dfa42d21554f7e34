"""The OAuth flow's answers, bounded: event hooks for a remote backend's HTTP client.

The SDK's OAuth provider reads the authorization server's answers (metadata, registration,
tokens) whole, and httpx reads each one into memory before the provider sees it: a hostile
server's 150 MB token answer took `agentify auth` to 1 GB and was stored as the token. So every
answer to a request that is not for the MCP endpoint itself is cut at `ANSWER_LIMIT` bytes and
must come uncompressed (a small gzip can unpack to gigabytes), and a token answer must be JSON
(RFC 6749 section 5.1). The MCP endpoint's own answers (results, event streams) are not touched.
Hooks, not a transport of our own: a client given a transport no longer honours the proxy
variables (HTTPS_PROXY) for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2

ANSWER_LIMIT = 256 * 1024  # metadata and token answers are a few KB


class AnswerRefused(httpx2.TransportError):
    """An OAuth answer that is too large, compressed, or (a token) not JSON."""


class AnswerBounds:
    """`hooks()` for an `httpx2.AsyncClient` that talks to the MCP endpoint at `mcp_url`."""

    def __init__(self, mcp_url: str) -> None:
        self._endpoint = _endpoint(httpx2.URL(mcp_url))

    def hooks(self) -> dict[str, list[Callable[..., Awaitable[None]]]]:
        return {"request": [self._on_request], "response": [self._on_response]}

    async def _on_request(self, request: httpx2.Request) -> None:
        if _endpoint(request.url) != self._endpoint:
            request.headers["Accept-Encoding"] = "identity"

    async def _on_response(self, response: httpx2.Response) -> None:
        """Runs once the head has come and before anything reads the body."""
        request = response.request
        if _endpoint(request.url) == self._endpoint:
            return
        problem = _problem(request, response)
        if problem is not None:
            await response.aclose()
            raise AnswerRefused(f"{_endpoint(request.url)} {problem}; agentify did not use it", request=request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)  # an async client's
        response.stream = _Capped(response.stream, request)


class _Capped(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, request: httpx2.Request) -> None:
        self._inner = inner
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > ANSWER_LIMIT:
                raise AnswerRefused(
                    f"{_endpoint(self._request.url)} answered more than {ANSWER_LIMIT // 1024} KiB; "
                    "agentify did not use it",
                    request=self._request,
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _problem(request: httpx2.Request, response: httpx2.Response) -> str | None:
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > ANSWER_LIMIT:
        return f"answered {int(length)} bytes, more than the {ANSWER_LIMIT // 1024} KiB an OAuth answer may have"
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        return f"answered compressed ({encoding}) though asked for no compression"
    is_token_request = request.method == "POST" and request.headers.get("Content-Type", "").startswith(
        "application/x-www-form-urlencoded"
    )
    media = response.headers.get("Content-Type", "").partition(";")[0].strip().lower()
    json = media == "application/json" or media.endswith("+json")
    if is_token_request and response.status_code < 300 and not json:
        return f"answered the token request with {media or 'no content type'}, not application/json"
    return None


def _endpoint(url: httpx2.URL) -> httpx2.URL:
    """Scheme, host, port and path: also what is shown (the query of an OAuth request may hold a code)."""
    return url.copy_with(query=None, fragment=None)
