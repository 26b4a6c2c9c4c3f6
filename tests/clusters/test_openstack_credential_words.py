"""check_cloud (and health) say what is wrong with an OpenStack connection's credentials file in words that
lead to the fix: the entries a clouds.yaml has, and that a clouds.yaml needs its entry named."""

from __future__ import annotations

import pytest
import yaml
from django.core.management import CommandError, call_command

from clusters.models import CloudConnection

pytestmark = pytest.mark.django_db


@pytest.fixture
def clouds_yaml(tmp_path, settings):
    settings.CREDENTIALS_DIR = tmp_path
    path = tmp_path / "clouds.yaml"
    path.write_text(yaml.safe_dump({"clouds": {"lab": {"auth": {"auth_url": "http://127.0.0.1:9/v3"}}}}))
    return path


@pytest.mark.parametrize(
    ("cloud", "words"),
    [
        ("staging", "has no entry 'staging'; its entries: lab"),
        ("", "is a clouds.yaml: name the entry to use in options.cloud (its entries: lab)"),
    ],
)
def test_check_cloud_names_the_entries_a_clouds_yaml_has(world, clouds_yaml, cloud, words):
    CloudConnection.objects.create(
        cloud_id="os-lab", backend="openstack", credentials_ref=str(clouds_yaml), options={"cloud": cloud}
    )
    with pytest.raises(CommandError) as error:
        call_command("check_cloud", "os-lab", stdout=open("/dev/null", "w"))
    assert words in str(error.value)
