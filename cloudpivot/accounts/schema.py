"""OpenAPI description of the bearer-token authentication (drf-spectacular finds it by import path)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "cloudpivot.accounts.authentication.BearerTokenAuthentication"
    name = "bearerToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An API token (cpt_…) from /api/v1/tokens."}
