"""The console's FastAPI app: the JSON API under /api, the WebSocket /ws, the page from debug_ui/.

Every route sits behind `ConsoleGuard` and `BodyLimit`, and serves only `Views` data, which is
redacted. The page shell and the API description need no token (they carry no data); the API
and the WebSocket do. The routes that act (tasks, tool calls, confirmations, restarts, pin
approvals) are `actions.py`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query
from fastapi.responses import FileResponse
from fastapi.security import HTTPBearer
from fastapi.staticfiles import StaticFiles
from loguru import logger

from agentify import __version__
from agentify.console.actions import action_routes
from agentify.console.confirmations import ConsoleConfirmer
from agentify.console.security import Access, ConsoleGuard
from agentify.console.stream import event_stream
from agentify.console.views import LEVELS, Views
from agentify.security.bodies import BodyLimit

if TYPE_CHECKING:
    from agentify.console.views import ConsoleServices


def create_app(services: ConsoleServices, access: Access) -> FastAPI:
    views = Views(services, access.base_url)
    confirmer = ConsoleConfirmer(services.bus, lambda: services.settings.current.confirm_timeout_seconds)
    app = FastAPI(
        title="agentify debug console",
        version=__version__,
        description="Live logs, traces and backend state of one agentify gateway. Every API request needs "
        "the console token as `Authorization: Bearer <token>` (use *Authorize* here); the WebSocket also "
        "takes it as the subprotocol `agentify-token.<base64url of the token>`.",
        docs_url="/docs",
        redoc_url=None,
    )
    app.add_middleware(BodyLimit)  # inner: only a request that passed the guard is read
    app.add_middleware(ConsoleGuard, access=access)
    app.include_router(_api_routes(services, views, confirmer), prefix="/api")
    app.add_api_websocket_route("/ws", event_stream(services, views, confirmer))
    ui = ui_directory()
    if ui is None:
        logger.warning("the console page (debug_ui/) is not installed; only the JSON API is served")
        return app
    app.mount("/ui", StaticFiles(directory=ui), name="ui")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(ui / "index.html")

    return app


def ui_directory() -> Path | None:
    """debug_ui/ inside the installed package (wheel), else next to it (source checkout)."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "debug_ui", package.parent / "debug_ui"):
        if (candidate / "index.html").is_file():
            return candidate
    return None


def _api_routes(services: ConsoleServices, views: Views, confirmer: ConsoleConfirmer) -> APIRouter:
    # The guard checks the token; this only describes it, so /docs offers "Authorize".
    router = APIRouter(tags=["console"], dependencies=[Depends(HTTPBearer(auto_error=False))])
    router.include_router(action_routes(services, views, confirmer))

    @router.get("/status", summary="Version, uptime, planner and task counts")
    async def status() -> dict[str, Any]:
        return views.status()

    @router.get("/backends", summary="Each backend: state, pid, tools, restarts, last error, recent stderr")
    async def backends() -> list[dict[str, Any]]:
        return views.backends()

    @router.get("/config", summary="The effective configuration, with every secret masked")
    async def config() -> dict[str, Any]:
        return views.config()

    @router.get("/logs", summary="Recent log records, oldest first")
    async def logs(
        level: Annotated[str, Query(description="lowest level: " + ", ".join(LEVELS))] = "TRACE",
        limit: Annotated[int, Query(ge=1, le=2000)] = 200,
        trace: Annotated[str | None, Query(description="only the records of this trace id")] = None,
    ) -> list[dict[str, Any]]:
        if level.upper() not in LEVELS:
            raise HTTPException(422, f"unknown level {level!r}; use one of {', '.join(LEVELS)}")
        return views.logs(level.upper(), limit, trace)

    @router.get("/traces", summary="Recent traces, newest first")
    async def traces(limit: Annotated[int, Query(ge=1, le=500)] = 50) -> list[dict[str, Any]]:
        return views.traces(limit)

    @router.get("/traces/{trace_id}", summary="One trace with its spans and its log records")
    async def trace(trace_id: str) -> dict[str, Any]:
        found = views.trace(trace_id)
        if found is None:
            raise HTTPException(404, f"no trace {trace_id!r}: only the most recent traces are kept")
        return found

    @router.get("/tools", summary="Each tool of the catalog: its input schema, call_tool name and confirmation")
    async def tools(
        backend: Annotated[str | None, Query(description="only the tools of this backend")] = None,
    ) -> list[dict[str, Any]]:
        return views.tools(backend)

    @router.get("/pins", summary="The tools pinning withholds or flags, with their difference")
    async def pins() -> dict[str, Any]:
        return views.pins()

    @router.get("/audit", summary="The newest audit records, newest first")
    async def audit(limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
        return views.audit(limit)

    return router
