"""The page of a person's own secrets (a stdio backend's `${person:NAME}`), posted back to its `/oauth/start/<id>`.

`Flows.submitted` decides whether this browser may answer the page now (once, and only the browser that opened
it); what it posted is then sealed into the person's vault record for the backend (`{"secrets": {NAME: value}}`),
and the flow ends, so the call that waits for it goes on (`backends/personal.py`). The values pass through here
only: nothing logs them, and the flow's record never holds them.
"""

from __future__ import annotations

from agentify.team.flows import Flows, FlowStoreUnavailable, Page
from agentify.team.vault import Vault, VaultUnavailable


async def submit_secrets(flows: Flows, vault: Vault, flow_id: str, browser: str | None, values: dict[str, str]) -> Page:
    """What the browser is answered after posting the page of flow `flow_id`."""
    try:
        record = await flows.submitted(flow_id, browser, values)
        if isinstance(record, Page):
            return record
        asked = {str(name): values[str(name)] for name in record["asks"]}
        try:
            await vault.save(str(record["principal"]), str(record["backend"]), {"secrets": asked})
        except VaultUnavailable as exc:
            await flows.finish(flow_id, f"your secrets could not be kept ({exc})")
            return Page(503, "agentify could not keep them now; call the tool again to get a new page.")
        await flows.finish(flow_id, None)
    except FlowStoreUnavailable:
        return Page(503, "agentify cannot reach its store of pages now; try again in a moment.")
    return Page(200, "agentify: kept. You can close this window and go back to your IDE.")
