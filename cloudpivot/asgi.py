"""ASGI entry point: HTTP through Django (one middleware stack per kind of caller), websockets through Channels."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cloudpivot.settings.base")
django.setup(set_prefix=False)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from cloudpivot.body_limits import BodyLimit  # noqa: E402
from cloudpivot.channel_layer import NAME_ENV  # noqa: E402
from cloudpivot.handlers import RoutedASGIHandler  # noqa: E402
from cloudpivot.routing import websocket_urlpatterns  # noqa: E402
from cloudpivot.shedding import with_load_shedding  # noqa: E402
from cloudpivot.unavailable import DatabaseUnavailableWebsocket  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": BodyLimit(with_load_shedding(RoutedASGIHandler())),
        "websocket": DatabaseUnavailableWebsocket(
            AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
        ),
    }
)

if os.environ.get(NAME_ENV):
    get_channel_layer()  # a web process of `serve` listens for the other processes' rings from the start
