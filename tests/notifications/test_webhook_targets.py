"""Issue 34, item 3: a webhook's target is checked and connected to as one step.

The post resolves the name once, checks every address, and connects to a checked one: a name that answers one
address to the check and another to the connection (DNS rebinding) cannot steer it. The name's resolution is
CloudPivot's own function (notifications.http_post.resolve); the tests replace it with a resolver that answers
differently the second time. Receivers are real servers on loopback.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from notifications import http_post
from notifications.webhooks import target_refusal
from tests import helpers
from tests.notifications.servers import RECEIVER, TLSReceiver, received, tls_files

NAME = "hooks.rebind.test"  # .test never resolves for real: only the resolver the test installs answers it


class Rebinding:
    """A resolver answering `first` to the first question and `then` to every later one."""

    def __init__(self, first: list[str], then: list[str]) -> None:
        self.first, self.then, self.asked = first, then, []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return self.first if len(self.asked) == 1 else self.then


@pytest.fixture
def receivers(tmp_path):
    """The signed-webhook receiver twice on one port: on 127.0.0.1 and on 127.0.0.2 (both loopback)."""
    port = helpers.free_port()
    logs, processes = {}, []
    for address in ("127.0.0.1", "127.0.0.2"):
        logs[address] = tmp_path / f"{address}.jsonl"
        processes.append(
            subprocess.Popen(
                [sys.executable, str(RECEIVER), str(port), "whsec_" + "A" * 44, str(logs[address]), address],
                start_new_session=True,
            )
        )
        helpers.wait_for(lambda a=address: listening(a, port), timeout=10, what=f"the receiver on {address}")
    yield port, logs
    for process in processes:
        helpers.stop_process_group(process)


def listening(address: str, port: int) -> bool:
    import socket

    with socket.socket() as probe:
        return probe.connect_ex((address, port)) == 0


def signed_headers() -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "webhook-id": "msg_1",
        "webhook-timestamp": "1",
        "webhook-signature": "v1,x",
    }


@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::7f00:1]/h",  # NAT64 of 127.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/h",  # NAT64 of the cloud metadata address 169.254.169.254
        "http://[64:ff9b::a00:1]:8080/h",  # NAT64 of 10.0.0.1
        "http://[64:ff9b:1::a00:1]/h",  # local-use NAT64
        "http://[2002:a9fe:a9fe::1]/h",  # 6to4 of 169.254.169.254
        "http://[::ffff:7f00:1]/h",  # IPv4-mapped 127.0.0.1
        "http://224.0.0.1/h",  # multicast
    ],
)
def test_an_ipv4_address_that_is_not_global_is_refused_inside_ipv6_too(world, api, url):
    assert target_refusal(url), url
    response = api("alice").post("/api/v1/webhooks", {"project": "alpha", "url": url}, format="json")
    assert response.status_code == 400, url
    assert response.json()["errors"][0]["field"] == "url"


@pytest.mark.parametrize("url", ["http://[64:ff9b::808:808]/h", "https://[2002:808:808::1]/h", "http://8.8.8.8/h"])
def test_a_global_ipv4_address_inside_ipv6_is_no_reason_to_refuse(url):
    assert target_refusal(url) is None


def test_the_post_goes_to_the_address_the_name_had_when_it_was_checked_with_the_name_as_host(
    settings, monkeypatch, receivers
):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # the receivers are on loopback
    port, logs = receivers
    resolver = Rebinding(first=["127.0.0.1"], then=["127.0.0.2"])
    monkeypatch.setattr(http_post, "resolve", resolver)
    headers = signed_headers() | {"webhook-id": "msg_1\r\nX-Injected: yes"}  # a header value never starts another
    status, error = http_post.post(f"http://{NAME}:{port}/hooks", headers, b'{"a": 1}')
    assert (status, error) == (401, "HTTP 401 Unauthorized")  # the receiver answered (the signature is a dummy)
    assert resolver.asked == [NAME]  # one lookup for the check and the connection
    [got] = received(logs["127.0.0.1"])
    assert got["host"] == f"{NAME}:{port}"
    assert got["id"] == "msg_1 X-Injected: yes"
    assert received(logs["127.0.0.2"]) == []


def test_a_name_that_rebinds_to_loopback_after_the_check_reaches_no_loopback_receiver(settings, monkeypatch, receivers):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    port, logs = receivers
    resolver = Rebinding(first=["8.8.8.8"], then=["127.0.0.1"])
    monkeypatch.setattr(http_post, "resolve", resolver)
    status, error = http_post.post(f"http://{NAME}:{port}/hooks", signed_headers(), b"{}", deadline=1)
    assert status is None and "8.8.8.8" in error, error  # it went (or tried to go) where the check looked
    assert resolver.asked == [NAME]
    assert received(logs["127.0.0.1"]) == []

    monkeypatch.setattr(http_post, "resolve", Rebinding(first=["8.8.8.8", "127.0.0.1"], then=[]))
    status, error = http_post.post(f"http://{NAME}:{port}/hooks", signed_headers(), b"{}", deadline=1)
    assert status is None and error.startswith("refused:") and "127.0.0.1" in error, error  # one bad answer is enough
    assert received(logs["127.0.0.1"]) == []


def test_https_to_a_checked_address_still_names_the_host_in_sni_and_in_the_certificate_check(
    settings, monkeypatch, tmp_path
):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    ca, cert, key = tls_files(tmp_path, NAME)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # trusted as OpenSSL's default CA file: nothing is patched
    server = TLSReceiver(cert, key)
    try:
        monkeypatch.setattr(http_post, "resolve", lambda host, port: ["127.0.0.1"])
        status, error = http_post.post(f"https://{NAME}:{server.port}/hooks", signed_headers(), b"{}")
        assert (status, error) == (204, "")
        assert server.seen == [(NAME, f"{NAME}:{server.port}")]

        other = "other.rebind.test"  # the same address under a name the certificate is not for
        status, error = http_post.post(f"https://{other}:{server.port}/hooks", signed_headers(), b"{}")
        assert status is None and "certificate" in error.lower(), error
        assert len(server.seen) == 1
    finally:
        server.close()
