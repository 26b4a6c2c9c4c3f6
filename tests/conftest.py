"""Every shared fixture lives in a plugin under tests/plugins/, registered here once; builders of rows are
in tests/builders.py. Test modules import neither conftest files nor each other.
"""

pytest_plugins = [
    "tests.plugins.world",
    "tests.plugins.servers",
    "tests.plugins.browser",
    "tests.plugins.kube",
    "tests.plugins.openstack",
    "tests.plugins.dependencies",
    "tests.plugins.guest",
]
