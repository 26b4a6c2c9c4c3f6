"""A Content-Security-Policy on every response: the pages load scripts, styles and data only from this server.

The portal has no inline script or style (htmx's own indicator <style> is switched off in base.html),
so the strict policy costs nothing and takes the teeth out of an injected <script>. The API docs
(Swagger UI, Redoc) start with inline scripts of drf-spectacular's templates: they get their own,
looser policy (CONTENT_SECURITY_POLICY_OVERRIDES).
"""

from __future__ import annotations

from django.conf import settings


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        policy = settings.CONTENT_SECURITY_POLICY
        for prefix, override in settings.CONTENT_SECURITY_POLICY_OVERRIDES.items():
            if request.path.startswith(prefix):
                policy = override
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response
