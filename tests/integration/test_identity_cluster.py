"""Each person's own identity upstream on a team of three replicas (`scripts/team.sh`: HAProxy, Redis): alice
and bob authorize the backend as themselves through whichever replica answers (2026-07-28 rounds spread over
the replicas; the browser's start and callback may reach any of them), and every replica then reaches the
backend as that person, from the vault in Redis (tests/unit/test_vault.py reads a Redis vault raw: no plaintext
token; team.sh's Redis has a password the test does not know)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import text_of, write_config
from tests.integration.cluster import team
from tests.integration.ide_client import MODES
from tests.integration.team import add_token, http_client
from tests.integration.test_identity_upstream import VAULT_KEY, Browser, Person, people_backend, whoami
from tests.servers import wait_accepting

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_two_people_authorize_and_act_as_themselves_across_three_replicas(tmp_path: Path) -> None:
    with people_backend(tmp_path) as (url, events):
        await wait_accepting(int(url.split(":")[2].split("/")[0]))
        backend = {"id": "gh", "url": url, "auth": {"type": "oauth", "perPrincipal": True}}
        server = {"auth": {"type": "tokens", "file": "tokens.json"}}
        config = write_config(tmp_path, [backend], planner={"provider": "offline"}, server=server)
        tokens = {name: await add_token(tmp_path / "tokens.json", name) for name in ("alice", "bob")}
        async with team(config, tmp_path / "team", env={"AGENTIFY_VAULT_KEY": VAULT_KEY}) as member:
            answers: dict[str, list[str]] = {}
            people = {name: Person(Browser(name)) for name in tokens}
            for mode in MODES:
                for name, token in tokens.items():
                    async with http_client(member.url, token, mode, elicitation_callback=people[name].elicit) as c:
                        for _ in range(3):  # calls spread over the replicas (2026-07-28 has no session)
                            answers.setdefault(name, []).append(text_of(await whoami(c)))
    for name in tokens:
        assert all(answer.startswith(f"you are {name}") for answer in answers[name]), answers
        assert len(people[name].asked) == 1, people[name].asked  # asked once, whichever replica answered later
    # One authorization each, whichever replica drove it: every other replica found the tokens in Redis.
    issued = [line for line in events.read_text().splitlines() if line.startswith("issued")]
    assert len(issued) == 2, issued
