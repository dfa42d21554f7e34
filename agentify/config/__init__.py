"""Configuration: the models (`models`), where values come from (`sources`), the spellings of other
MCP clients (`dialects`), and the walk that names unknown keys (`keys`)."""

from agentify.config.models import (
    BACKEND_ID,
    DEFAULT_MODEL,
    EXPOSED,
    BackendConfig,
    BearerSettings,
    Config,
    ExchangeSettings,
    Exposed,
    ItemFilter,
    LogLevel,
    OAuthSettings,
    PlannerConfig,
    ToolFilter,
)
from agentify.config.sources import ConfigSources, load_sources

__all__ = [
    "BACKEND_ID",
    "DEFAULT_MODEL",
    "EXPOSED",
    "BackendConfig",
    "BearerSettings",
    "Config",
    "ConfigSources",
    "Exposed",
    "ItemFilter",
    "LogLevel",
    "ExchangeSettings",
    "OAuthSettings",
    "PlannerConfig",
    "ToolFilter",
    "load_sources",
]
