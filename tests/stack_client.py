"""Test clients that go through the middleware stack production would choose (cloudpivot/handlers.py).

Django's test client builds its handler from MIDDLEWARE, the full page stack; the servers choose a
shorter stack for the Runner API and for bearer-token API calls. `routed(client)` gives a client the
same choice, by the same function, so API tests see the stack real callers get.
"""

from __future__ import annotations

from django.test import Client

from cloudpivot.handlers import MACHINE, PAGES, TOKEN_API, stack_for, stack_handler


class RoutedClientHandler:
    def __init__(self, handler_class: type, enforce_csrf_checks: bool) -> None:
        self.handlers = {
            stack: stack_handler(handler_class, stack, enforce_csrf_checks=enforce_csrf_checks)
            for stack in (MACHINE, TOKEN_API, PAGES)
        }
        self.last_stack = ""

    def __call__(self, environ):
        self.last_stack = stack_for(environ.get("PATH_INFO", ""), environ.get("HTTP_AUTHORIZATION", ""))
        return self.handlers[self.last_stack](environ)


def routed(client: Client) -> Client:
    client.handler = RoutedClientHandler(type(client.handler), client.handler.enforce_csrf_checks)
    return client
