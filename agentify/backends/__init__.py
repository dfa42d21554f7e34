"""The backend layer: connections (stdio, streamable HTTP, SSE), a supervisor per backend, the call
adapter, the tool manifest, and the manager that hands out resolved tool handles."""

from agentify.backends.handles import ToolCatalog, ToolHandle
from agentify.backends.manager import BackendManager
from agentify.backends.state import BackendState, BackendStatus

__all__ = ["BackendManager", "BackendState", "BackendStatus", "ToolCatalog", "ToolHandle"]
