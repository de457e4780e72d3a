"""/docs (Swagger UI) and /redoc served from the installed package, not from a CDN.

GPU nodes often have no way out to the internet; FastAPI's default pages load their JavaScript
and CSS from jsDelivr and stay blank there. The files come from the `fastapi-offline` package
(Swagger UI 5, ReDoc 2) and are served by the app itself under `/docs/static/`.
"""

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_URL = "/docs/static"
STATIC_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def static_dir() -> Path:
    """The directory holding Swagger UI's and ReDoc's files."""
    return Path(str(files("fastapi_offline") / "static"))


def mount_docs(app: FastAPI) -> None:
    """Add /docs, /redoc and their static files to an app created with docs_url=redoc_url=None."""
    app.mount(STATIC_URL, StaticFiles(directory=static_dir()), name="docs-static")
    oauth2_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        """Swagger UI over this API's OpenAPI document."""
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{oauth2_url}",
            swagger_js_url=f"{root}{STATIC_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{STATIC_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{STATIC_URL}/favicon.png",
        )

    @app.get(oauth2_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        """Swagger UI's OAuth2 redirect page."""
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        """ReDoc over this API's OpenAPI document."""
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{STATIC_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{STATIC_URL}/favicon.png",
            with_google_fonts=False,
        )
