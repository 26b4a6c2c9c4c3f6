"""The launch form's extra volumes ("10:data, 20") through Django's test client against the dev OpenStack (jobs
are only queued here): they reach the instance as the API's `volumes`, bad ones are refused next to the field
(naming the volume), the instance page lists them, and the "Will it fit?" line counts them."""

from __future__ import annotations

import pytest

from cloudpivot.accounts.models import Quota
from resources.models import Instance
from tests.resources.launch_form import field_errors, launch, page_client

pytestmark = pytest.mark.e2e


def test_the_volumes_typed_reach_the_instance_and_its_page_lists_them(os_world):
    bob = page_client(os_world.world.bob)
    response = launch(bob, volumes=" 2:data, 3 ,")
    assert response.status_code == 302, field_errors(response.content.decode(), "volumes")
    instance = Instance.objects.get()
    assert instance.volumes == [{"name": "data", "size_gb": 2}, {"name": "", "size_gb": 3}]
    html = bob.get(response["Location"]).content.decode()
    assert 'id="instance-volumes"><span class="volume">data <span class="muted">2 GB</span></span>, ' in html
    assert '<span class="volume"><span class="muted">3 GB</span></span></dd>' in html
    plain = bob.get(f"/instances/{launch(bob, name='vm2').headers['Location'].split('/')[2]}/").content.decode()
    assert "none besides the root disk" in plain


@pytest.mark.parametrize(
    ("volumes", "words"),
    [
        ("2, ten", "volume 2: 'ten' is not a size in GB (write 10, or 10:data to name it)"),
        ("2, 0", "volume 2: Ensure this value is greater than or equal to 1."),
        ("2:bad name", "volume 1: up to 32 letters, digits"),
        ("1:a, 1:a", "volume 2: 'a' is given twice"),
        (",".join(["1"] * 9), "Ensure this field has no more than 8 elements."),
    ],
)
def test_bad_volumes_are_refused_next_to_the_field(os_world, volumes, words):
    response = launch(page_client(os_world.world.bob), volumes=volumes)
    assert response.status_code == 400
    html = response.content.decode()
    assert words in field_errors(html, "volumes").replace("&#x27;", "'")
    assert 'class="form-errors"' not in html
    assert 'aria-invalid="true"' in html.split('id="field-volumes"')[1].split("</div>")[1]
    assert not Instance.objects.exists()


def test_the_fit_line_counts_the_volumes(os_world):
    Quota.objects.create(project=os_world.world.alpha, max_volume_gb=4)
    bob = page_client(os_world.world.bob)
    form = {"cloud": "os-dev", "project": "alpha", "name": "vm1", "flavor": "cp.tiny"}
    assert 'data-outcome="starts_now"' in bob.post("/instances/new/fit/", form | {"volumes": "3"}).content.decode()
    never = bob.post("/instances/new/fit/", form | {"volumes": "2, 2:logs"}).content.decode()
    assert 'data-outcome="never_fits"' in never and "disk 5 GB &gt; 4 GB" in never, never
    assert "not a size in GB" in bob.post("/instances/new/fit/", form | {"volumes": "x"}).content.decode()
    # over the quota in the create itself: the service's refusal (naming the flavor's row) on top of the form
    response = launch(bob, volumes="4")
    assert response.status_code == 400 and "quota exceeded: volume GB 5/4 left" in response.content.decode()
    assert not Instance.objects.exists()
