"""The retrieval indexes in use, by the content of their catalog: a backend's tools changing gives a new index, and
the same tools (in any session, on any request) share one, with its vectors and postings."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict

from agentify.planner.catalog import Catalog
from agentify.planner.retrieval import ToolIndex

CACHE_SIZE = 4


def fingerprint(catalog: Catalog) -> str:
    """A digest of everything the index reads; equal digests mean an equal index."""
    digest = hashlib.sha256()
    for tool in catalog.tools.values():
        part = [tool.name, tool.backend, tool.backend_description, tool.tool.title, tool.tool.description]
        hints = tool.tool.annotations.model_dump() if tool.tool.annotations else None  # destructive tools
        digest.update(json.dumps([part, hints, tool.input_schema], sort_keys=True, default=str).encode())
    return digest.hexdigest()


class IndexCache:
    """The last few indexes by catalog content: a backend's tools changing gives a new index."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._indexes: OrderedDict[str, ToolIndex] = OrderedDict()
        self._last: tuple[Catalog, ToolIndex] | None = None

    def get(self, catalog: Catalog) -> ToolIndex:
        # The task runner hands out the same Catalog object until tools change: skip the fingerprint.
        if self._last is not None and self._last[0] is catalog:
            return self._last[1]
        index = self._lookup(catalog)
        self._last = (catalog, index)
        return index

    def _lookup(self, catalog: Catalog) -> ToolIndex:
        key = fingerprint(catalog)
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = ToolIndex(catalog)
            while len(self._indexes) > self._size:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(key)
        return index
