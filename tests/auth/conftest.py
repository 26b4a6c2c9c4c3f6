"""A real OpenID Connect provider (tests/oidc_provider, django-oauth-toolkit) and a CloudPivot Daphne that uses it.

Both run as subprocesses bound to 127.0.0.1 on free ports. The provider has its own SQLite database
and an RSA signing key made here; CloudPivot gets the provider from the same CLOUDPIVOT_OIDC_*
variables an operator sets (the client secret through CLOUDPIVOT_OIDC_CLIENT_SECRET_FILE).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests import helpers

PROVIDER_ID = "testidp"
CLIENT_ID = "cloudpivot-test"
GROUP_MAP = {
    "cp-alpha-admins": {"alpha": "admin"},
    "cp-alpha": {"alpha": "reader"},
    "cp-beta": {"beta": "submitter"},
}


def _rsa_key_pem() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory, server_logs):
    """The provider, running; `provision(...)` creates or updates its client and a user with groups."""
    home = tmp_path_factory.mktemp("oidc-provider")
    key_file = home / "rsa.pem"
    key_file.write_bytes(_rsa_key_pem())
    key_file.chmod(0o600)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "CLOUDPIVOT_", "DATABASE_URL", "REDIS_URL"))
    }
    env |= {
        "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
        "OIDC_TEST_SECRET_KEY": secrets.token_urlsafe(40),
        "OIDC_TEST_DATABASE": str(home / "provider.sqlite3"),
        "OIDC_TEST_RSA_KEY_FILE": str(key_file),
    }
    run = {"env": env, "cwd": helpers.BASE_DIR, "check": True, "timeout": 120, "capture_output": True}
    subprocess.run([sys.executable, "-m", "django", "migrate", "--noinput", "--verbosity", "0"], **run)
    port = helpers.free_port()
    log = server_logs / "oidc-provider.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks"],
        env=env,
        cwd=helpers.BASE_DIR,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    helpers.wait_for(
        lambda: helpers._answers(f"{url}/o/.well-known/openid-configuration") or process.poll() is not None,
        timeout=30,
        what="the OIDC provider to answer",
    )
    assert process.poll() is None, f"the OIDC provider exited: {log.read_text()[-2000:]}"

    def provision(*, redirect_uri: str, client_secret: str, username: str, password: str, groups: list[str]):
        subprocess.run(
            [sys.executable, "-m", "tests.oidc_provider.provision"]
            # --name=value: a secret from token_urlsafe may begin with "-", which argparse would take for an option
            + [f"--client-id={CLIENT_ID}", f"--client-secret={client_secret}", f"--redirect-uri={redirect_uri}"]
            + [f"--username={username}", f"--password={password}", f"--email={username}@idp.example.org"]
            + [f"--groups={','.join(groups)}"],
            **run,
        )

    yield SimpleNamespace(url=url, issuer=f"{url}/o", port=port, log=log, provision=provision)
    helpers.stop_process_group(process)


@pytest.fixture(scope="session")
def oidc_daphne(django_db_setup, django_db_blocker, oidc_provider, tmp_path_factory, server_logs):
    """CloudPivot's Daphne on the test database, with the test provider and GROUP_MAP from the environment."""
    port = helpers.free_port()
    secret = secrets.token_urlsafe(32)
    secret_file = tmp_path_factory.mktemp("oidc-client") / "client-secret"
    secret_file.write_text(secret)
    env = helpers.server_environment(port=port, runs_dir=tmp_path_factory.mktemp("oidc-runs"))
    env |= {
        "CLOUDPIVOT_OIDC_SERVER_URL": oidc_provider.issuer,
        "CLOUDPIVOT_OIDC_ID": PROVIDER_ID,
        "CLOUDPIVOT_OIDC_NAME": "Test IdP",
        "CLOUDPIVOT_OIDC_CLIENT_ID": CLIENT_ID,
        "CLOUDPIVOT_OIDC_CLIENT_SECRET_FILE": str(secret_file),
        "CLOUDPIVOT_OIDC_GROUP_MAP": json.dumps(GROUP_MAP),
        "CLOUDPIVOT_LOG_LEVEL": "INFO",
    }
    log = server_logs / "oidc-daphne.log"
    process = helpers.start_daphne(port=port, env=env, log=log)
    url = f"http://127.0.0.1:{port}"
    yield SimpleNamespace(
        url=url,
        log=log,
        client_secret=secret,
        redirect_uri=f"{url}/accounts/oidc/{PROVIDER_ID}/login/callback/",
    )
    helpers.stop_process_group(process)
