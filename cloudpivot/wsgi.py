"""WSGI entry point (no websockets): the same middleware stacks per kind of caller as under ASGI."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cloudpivot.settings.base")
django.setup(set_prefix=False)

from cloudpivot.handlers import RoutedWSGIHandler  # noqa: E402

application = RoutedWSGIHandler()
