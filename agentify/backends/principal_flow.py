"""One person's authorization of one backend, driven by the replica that made the flow (`team/flows.py`).

The SDK's provider does the work exactly as `agentify auth` does (`login.authorize_session`); only the two ends
differ: the authorization URL is handed to the flow (the person reaches it through `/oauth/start/<id>`), and
the code comes back through `/oauth/callback` on whichever replica the browser reached (this replica polls the
flow for it: it holds the PKCE verifier). The tokens land in the store `for_flow` wraps: that person's vault
record (`VaultTokens`), or the shared token file of a one-person gateway (`TokenFile`).
How it ended is written to the flow, so the call waiting for it (on any replica) can go on or say why not.
"""

from __future__ import annotations

from typing import Self
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from loguru import logger
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

from agentify._common.errors import first
from agentify.backends.login import authorize_session, registered_for
from agentify.backends.oauth import TokenFile
from agentify.backends.principal_tokens import VaultTokens
from agentify.config import BackendConfig
from agentify.security.credentials import mask_url
from agentify.team.flows import FLOW_SECONDS, Flows, FlowStoreUnavailable, polled
from agentify.team.vault import VaultUnavailable


class FlowTokens(TokenFile):
    """The store a flow writes, as the flow sees it: its current tokens count as none (they are why the person is
    asked: missing, refused, or short of a scope) until the flow stores new ones, and a client registered for
    another redirect counts as none too (the client registers again for the gateway's callback). Over a token
    file as it is; over a person's vault record as `VaultFlowTokens`."""

    _redirect = ""
    _fresh = False

    def redirected(self, redirect_uri: str) -> Self:
        self._redirect = redirect_uri
        return self

    async def get_tokens(self) -> OAuthToken | None:
        current = await super().get_tokens()  # read all the same: a vault record loads here
        return current if self._fresh else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._fresh = True
        await super().set_tokens(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return registered_for(await super().get_client_info(), self._redirect)


class VaultFlowTokens(FlowTokens, VaultTokens):
    """`FlowTokens` over one person's vault record."""


async def drive(spec: BackendConfig, store: TokenFile, flow_id: str, flows: Flows, redirect_uri: str) -> None:
    """Runs the flow to its end (at most `FLOW_SECONDS`) with `store` (a `FlowTokens`) and records the
    outcome; never raises but for cancellation (the gateway stopping)."""
    log = logger.bind(backend=spec.id)

    async def open_url(url: str) -> None:
        state = parse_qs(urlsplit(url).query).get("state", [""])[0]
        await flows.reached(flow_id, url, state)

    async def wait_for_code() -> AuthorizationCodeResult:
        answer = await polled(lambda: flows.code(flow_id))
        return AuthorizationCodeResult(
            code=str(answer.get("code", "")), state=answer.get("state"), iss=answer.get("iss")
        )

    error: str | None = None
    try:
        with anyio.fail_after(FLOW_SECONDS):
            await authorize_session(spec, store, redirect_uri, open_url, wait_for_code)
    except Exception as exc:  # every way the flow can fail becomes its outcome, said to the person who waits
        error = _why(spec, exc)
        log.info("authorization for a person did not complete: {}", error)
    else:
        log.info("a person authorized the backend")
    try:
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await flows.finish(flow_id, error)
    except FlowStoreUnavailable as exc:
        log.warning("the outcome of an authorization could not be recorded: {}", exc)


def _why(spec: BackendConfig, exc: Exception) -> str:
    where = mask_url(spec.url or "")
    if first(exc, TimeoutError) is not None:
        return f"nobody completed the authorization within {FLOW_SECONDS / 60:g} minutes"
    if (unavailable := first(exc, (VaultUnavailable, FlowStoreUnavailable))) is not None:
        return str(unavailable)
    if (flow := first(exc, (OAuthFlowError, OAuthTokenError, OAuthRegistrationError))) is not None:
        if "Protected resource" in str(flow) and "does not match" in str(flow):
            return (
                f"its protected-resource metadata names another resource than {where} ({str(flow)[:300]}): "
                "authorizing cannot fix this; the backend's url in the config, or the server's metadata, is wrong"
            )
        return f"the OAuth flow with {where} failed ({type(flow).__name__}: {str(flow)[:300]})"
    if (http := first(exc, httpx2.HTTPError)) is not None:
        return f"{where} could not be reached ({type(http).__name__})"
    leaf = first(exc, Exception) or exc
    return f"unexpected failure authorizing at {where}: {type(leaf).__name__}"
