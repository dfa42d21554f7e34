"""Which protocol era a backend's sessions speak, and the fall-back that keeps question-asking backends working.

`auto` opens a session the way the SDK's client does in its auto mode: `server/discover` first (2026-07-28),
`initialize` (2025-11-25) when the server does not know it. A server that speaks both eras is then on
2026-07-28, where it cannot send server-to-client requests: one that asks its user (elicitation) or
the client's model (sampling) only by request fails its call with "no back-channel for server-initiated
requests". When that answer comes, the era falls back to 2025-11-25 for the rest of the gateway's life,
the session is reopened, and the call is made once more. A pinned `protocol` is never changed.
"""

from __future__ import annotations

from collections.abc import Awaitable

import mcp_types as types
from loguru import logger
from mcp.client._probe import negotiate_auto  # the SDK's own auto-mode policy, so both eras are probed alike
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types.version import is_version_at_least

from agentify.config import BackendConfig
from agentify.errors import BackendError

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
NO_BACK_CHANNEL = "no back-channel"  # the SDK's NoBackChannelError words, as a server returns them


class EraFellBack(Exception):
    """A call failed because its session's era has no back-channel, and the era fell back: call it again."""


class Era:
    """One backend's era setting, and whether it fell back (remembered until the gateway stops)."""

    def __init__(self, spec: BackendConfig) -> None:
        self._spec = spec
        self.fell_back = False

    @property
    def protocol(self) -> str:
        return LEGACY if self.fell_back else self._spec.protocol

    async def open(self, session: ClientSession) -> None:
        """`initialize` or `server/discover`, as the setting says. Raises MCPError as the SDK does."""
        if self.protocol == LEGACY:
            await session.initialize()
        elif self.protocol == MODERN:
            await session.discover()
        else:
            await negotiate_auto(session)

    async def watch(self, session: ClientSession, call: Awaitable[types.CallToolResult]) -> types.CallToolResult:
        """The call's result.

        Raises:
            EraFellBack: it failed for want of a back-channel, and the era fell back (reopen, call again).
            BackendError: as the call does; for want of a back-channel on a pinned era, with `PINNED_HINT`.
        """
        try:
            result = await call
        except BackendError as exc:
            cause = exc.__cause__
            if isinstance(cause, MCPError) and lacks_back_channel(session, cause):
                if self.fall_back():
                    raise EraFellBack from exc
                raise BackendError(exc.message + PINNED_HINT) from cause
            raise
        if result.is_error and lacks_back_channel(session, result) and self.fall_back():
            raise EraFellBack
        return result

    def fall_back(self) -> bool:
        """After a call failed for want of a back-channel (`lacks_back_channel`): True when the era now falls
        back to 2025-11-25; False for a pinned `protocol`, which is the user's choice (`PINNED_HINT` says
        what to change)."""
        if self._spec.protocol != "auto" or self.fell_back:
            return False
        self.fell_back = True
        logger.bind(backend=self._spec.id).info(
            "the server asks by server-to-client request, which 2026-07-28 cannot carry: "
            'reopening its session on 2025-11-25 (set "protocol": "2025-11-25" to start there)'
        )
        return True


PINNED_HINT = (
    " This server asks its questions by server-to-client request, which the 2026-07-28 protocol cannot carry: "
    'set "protocol": "2025-11-25" (or "auto") on this backend in the config.'
)


def lacks_back_channel(session: ClientSession, failure: MCPError | types.CallToolResult) -> bool:
    """Whether a call failed because the server could not ask on this 2026-07-28 session."""
    if not is_modern(session):
        return False
    if isinstance(failure, MCPError):
        text = failure.error.message
    else:
        text = " ".join(c.text for c in failure.content if isinstance(c, types.TextContent))
    return NO_BACK_CHANNEL in text.lower()


def is_modern(session: ClientSession) -> bool:
    version = session.protocol_version
    return version is not None and is_version_at_least(version, MODERN)
