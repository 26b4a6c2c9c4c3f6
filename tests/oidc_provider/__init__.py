"""A real OpenID Connect provider for the login tests: a tiny Django project on django-oauth-toolkit.

Run by tests/auth/conftest.py as its own process on 127.0.0.1 with its own SQLite database and an
RSA key made at test time. Never part of CloudPivot itself.
"""
