"""An instance is handed only to someone who may act on it: a submitter or admin of its project (issue 30)."""

from __future__ import annotations

import pytest

from cloudpivot.exceptions import InvalidSpec
from resources.models import Instance
from resources.services import instance_owner_change
from tests.builders import instance_row

pytestmark = pytest.mark.django_db


def test_a_reader_or_an_outsider_cannot_be_handed_an_instance_a_submitter_or_admin_can(world):
    instance = instance_row(connection=world.local, project=world.alpha, owner=world.bob)
    for user, words in ((world.rita, "rita is a reader in project alpha"), (world.charlie, "is not a member")):
        with pytest.raises(InvalidSpec, match=words) as refused:
            instance_owner_change(instance=instance, new_owner=user, actor=world.alice)
        assert refused.value.errors == [{"field": "owner", "message": refused.value.message}]
    assert Instance.objects.get(pk=instance.pk).owner == world.bob
    instance_owner_change(instance=instance, new_owner=world.alice, actor=world.alice)
    assert Instance.objects.get(pk=instance.pk).owner == world.alice
