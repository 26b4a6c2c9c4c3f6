"""A Content-Security-Policy on every response: the pages load scripts, styles and data only from this server.

The portal has no inline script or style (htmx's own indicator <style> is switched off in base.html),
so the strict policy costs nothing and takes the teeth out of an injected <script>. The API docs
(Swagger UI, Redoc) start with inline scripts of drf-spectacular's templates: they get their own,
looser policy (CONTENT_SECURITY_POLICY_OVERRIDES).

Sync- and async-capable (no database work), so under ASGI it never puts a thread hop into a request.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings


class ContentSecurityPolicyMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        return self._add_policy(request, self.get_response(request))

    async def _acall(self, request):
        return self._add_policy(request, await self.get_response(request))

    @staticmethod
    def _add_policy(request, response):
        policy = settings.CONTENT_SECURITY_POLICY
        for prefix, override in settings.CONTENT_SECURITY_POLICY_OVERRIDES.items():
            if request.path.startswith(prefix):
                policy = override
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response
