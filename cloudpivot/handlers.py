"""One middleware stack per kind of caller, chosen by path (and, for the API, by credential) before Django runs.

Django runs the whole MIDDLEWARE list on every request. Most of it is for people in a browser:
sessions, CSRF, messages, allauth, htmx, static files. The Runner API (host agents and VM Runners
with their own credentials) and `/healthz` need none of it, and neither does the REST API called
with a bearer token (no cookie, so nothing to forge; DRF authenticates the token). Each of those
gets a short stack of its own (settings: MACHINE_MIDDLEWARE, TOKEN_API_MIDDLEWARE), every member
async-capable, so under the ASGI server a request hops to a thread only for the view itself.

Everything else, the API called with a session cookie included, gets the full MIDDLEWARE:
a request this module does not recognise is never given less protection.
"""

from __future__ import annotations

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.core.handlers.wsgi import WSGIHandler

MACHINE = "MACHINE_MIDDLEWARE"
TOKEN_API = "TOKEN_API_MIDDLEWARE"
PAGES = "MIDDLEWARE"
MACHINE_PREFIXES = ("/runner/", "/healthz", "/readyz")
TOKEN_API_PREFIX = "/api/v1/"
# The token API's async views (the event feed's long-poll waits on the event loop: notifications/api/long_poll.py):
# the WSGI bridge would run them to the end in one of its few threads.
ASYNC_API_PATHS = frozenset({"/api/v1/events", "/api/v1/events/"})


def stack_for(path: str, authorization: str) -> str:
    """The settings name of the middleware list for a request: the one place the choice is made."""
    if path.startswith(MACHINE_PREFIXES):
        return MACHINE
    if path.startswith(TOKEN_API_PREFIX) and authorization.startswith("Bearer "):
        return TOKEN_API
    return PAGES


class StackMixin(BaseHandler):
    """A Django handler that builds its chain from the middleware list named `stack` instead of MIDDLEWARE."""

    stack = PAGES

    def load_middleware(self, is_async: bool = False) -> None:
        # BaseHandler reads settings.MIDDLEWARE; lend it this stack's list while the chain is built (once,
        # at start-up, before any request). Checks and the test client go on seeing the full list.
        full = settings.MIDDLEWARE
        settings.MIDDLEWARE = getattr(settings, self.stack)
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = full


def stack_handler(base: type[BaseHandler], stack: str, *args, **kwargs) -> BaseHandler:
    handler_class = type(f"{stack.title().replace('_', '')}{base.__name__}", (StackMixin, base), {"stack": stack})
    return handler_class(*args, **kwargs)


class RoutedASGIHandler:
    """The ASGI application for HTTP: each request to the handler of its stack. With CLOUDPIVOT_TOKEN_API_WSGI=true
    the bearer-token API goes through Django's WSGI handler in one thread hop (cloudpivot/wsgi_bridge.py): it has
    no async view, and the ASGI handler's three hops cost more than its view (the default: docs/decisions.md)."""

    def __init__(self) -> None:
        self.handlers = {stack: stack_handler(ASGIHandler, stack) for stack in (MACHINE, TOKEN_API, PAGES)}
        self.async_token_api = self.handlers[TOKEN_API]
        if settings.TOKEN_API_WSGI:
            from cloudpivot.wsgi_bridge import WSGIBridge

            self.handlers[TOKEN_API] = WSGIBridge(stack_handler(WSGIHandler, TOKEN_API))

    async def __call__(self, scope, receive, send):
        authorization = next((value for name, value in scope.get("headers", ()) if name == b"authorization"), b"")
        path = scope.get("path", "")
        stack = stack_for(path, authorization.decode("latin-1"))
        if stack == TOKEN_API and path in ASYNC_API_PATHS:  # an async view: through the ASGI handler, no thread held
            return await self.async_token_api(scope, receive, send)
        return await self.handlers[stack](scope, receive, send)


class RoutedWSGIHandler:
    """The WSGI application: the same choice as under ASGI."""

    def __init__(self) -> None:
        self.handlers = {stack: stack_handler(WSGIHandler, stack) for stack in (MACHINE, TOKEN_API, PAGES)}

    def __call__(self, environ, start_response):
        stack = stack_for(environ.get("PATH_INFO", ""), environ.get("HTTP_AUTHORIZATION", ""))
        return self.handlers[stack](environ, start_response)
