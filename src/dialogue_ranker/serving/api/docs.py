"""``/docs``: Swagger UI served from the files of the ``fastapi-offline`` package, never a CDN.

A service on a closed network (or a browser that must not fetch third-party scripts next to an
API key) still gets its interactive documentation; ``--server.docs false`` turns it off with
``/openapi.json``.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_PATH = "/docs/static"


def static_directory() -> Path:
    """The packaged Swagger UI bundle (swagger-ui-bundle.js, swagger-ui.css, favicon.png)."""
    return Path(str(files("fastapi_offline") / "static"))


def install(app: FastAPI) -> None:
    """Mount the static files and the ``/docs`` page on ``app``."""
    app.mount(STATIC_PATH, StaticFiles(directory=static_directory()), name="docs-static")

    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} - docs",
            swagger_js_url=f"{STATIC_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC_PATH}/favicon.png",
        )

    app.add_api_route("/docs", swagger_ui, methods=["GET"], include_in_schema=False)
