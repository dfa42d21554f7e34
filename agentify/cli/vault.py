"""`agentify vault forget NAME`, and what `agentify token remove NAME` does beside the tokens file: drop that
person's upstream tokens (backends with `auth.perPrincipal`) from the vault (team/vault.py).

Records are found by a digest of the principal's name, so no vault key is needed to drop them. Without any
backend with `perPrincipal` in the config there is nothing to drop (and no Redis is reached).
"""

from __future__ import annotations

import argparse

import anyio

from agentify._common.errors import ConfigError
from agentify.cli.errors import EXIT_OK, UsageError
from agentify.cli.output import note
from agentify.config import Config, load_sources
from agentify.team.vault import VaultUnavailable, per_principal_backends, principal_prefix, store_for


def vault_command(args: argparse.Namespace) -> int:
    """Raises UsageError (exit 2): a bad name, or a vault that cannot be reached."""
    name = args.name
    if not name.strip():
        raise UsageError("give the name of a person (a tokens file name or a JWT's sub)")
    config = _config(args.config)
    if not per_principal_backends(config):
        note("agentify vault forget: no backend of this config has auth.perPrincipal: nothing to drop")
        return EXIT_OK
    dropped = _forget(config, name)
    note(f"agentify vault forget: dropped {dropped} upstream token record(s) of {name}")
    return EXIT_OK


def forget_upstream(config_path: str | None, name: str, prog: str) -> None:
    """After `token remove`: drops the person's upstream tokens where the config keeps them, if it has any."""
    try:
        config = _config(config_path)
    except UsageError:
        return  # the tokens file was given by --file, with no readable config: no vault is known
    if per_principal_backends(config):
        dropped = _forget(config, name)
        note(f"{prog}: dropped {dropped} upstream token record(s) of {name} from the vault")


def _config(path: str | None) -> Config:
    try:
        return load_sources(path, {}).resolve()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _forget(config: Config, name: str) -> int:
    async def forget() -> int:
        store = store_for(config)
        try:
            return await store.drop(principal_prefix(name))
        finally:
            await store.aclose()

    try:
        return anyio.run(forget)
    except VaultUnavailable as exc:
        raise UsageError(str(exc)) from None
