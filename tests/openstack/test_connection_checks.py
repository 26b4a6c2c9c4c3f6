"""The checks of an OpenStack connection (check_cloud, "Test connection", health) against the dev OpenStack."""

from __future__ import annotations

import uuid

import pytest
from django.core.management import CommandError, call_command

from clusters.backends.openstack import OpenStackClient

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_networks_auto_is_one_word_not_four_network_names(os_live, capsys):
    os_live.connection.options["networks"] = "auto"
    os_live.connection.save()
    call_command("check_cloud", "os-dev")
    out = capsys.readouterr().out
    assert "MISSING network" not in out
    assert "ok      networks: auto" in out
    assert OpenStackClient(os_live.connection).networks_argument() == "auto"


def test_a_single_network_name_given_as_a_string_is_that_network(os_live, capsys):
    name = f"cp-test-{uuid.uuid4().hex[:6]}"
    # the dev cloud has no tenant network types: a flat provider network (admin) of its own physnet
    network = os_live.conn.network.create_network(
        name=name, provider_network_type="flat", provider_physical_network=name
    )
    try:
        os_live.connection.options["networks"] = name
        os_live.connection.save()
        call_command("check_cloud", "os-dev")
        assert f"ok      network '{name}'" in capsys.readouterr().out
        assert OpenStackClient(os_live.connection).networks_argument() == [{"uuid": network.id}]
    finally:
        os_live.conn.network.delete_network(network.id)


def test_a_missing_flavor_image_or_network_lists_what_exists(os_live, capsys):
    os_live.connection.options.update(flavor="cp.tinny", image="no-such-image", networks=["no-such-net"])
    os_live.connection.save()
    with pytest.raises(CommandError):
        call_command("check_cloud", "os-dev")
    out = capsys.readouterr().out
    flavor_line = next(line for line in out.splitlines() if "flavor 'cp.tinny'" in line)
    assert "there are:" in flavor_line and "cp.tiny" in flavor_line and "cp.nohost" in flavor_line
    image_line = next(line for line in out.splitlines() if "image 'no-such-image'" in line)
    assert "cp-runner-fake" in image_line
    assert "MISSING network 'no-such-net'" in out
