"""Who calls /runner/v2/sync: a host agent (`cpa_…`) for the `local` connections it serves, or a VM Runner
(`cpr_…`) for its one attempt. User API tokens are refused, as on v1."""

from __future__ import annotations

from cloudpivot import credentials
from cloudpivot.common import sha256_hex
from clusters.backends import handed_out_kinds
from clusters.backends.local import agent_name, connection_runs_dir
from clusters.models import CloudConnection
from tasks.models import Attempt
from tasks.services.runner_sync import SyncScope


class SyncRefused(Exception):
    """401: the credential is missing, of the wrong kind, or unknown."""


def sync_scope(*, authorization: str, claimed_agent: str) -> SyncScope:
    keyword, _, value = authorization.partition(" ")
    value = value.strip()
    if keyword != "Bearer" or not value:
        raise SyncRefused("A host agent or runner credential is required: Authorization: Bearer cpa_… or cpr_…")
    if value.startswith(credentials.AGENT_PREFIX):
        return _agent_scope(value, claimed_agent)
    if value.startswith(credentials.PREFIX):
        attempt = Attempt.objects.select_related("task").filter(runner_token_hash=sha256_hex(value)).first()
        if attempt is None:
            raise SyncRefused("Unknown runner credential.")
        return SyncScope(attempt=attempt)
    raise SyncRefused("User API tokens are not accepted on the Runner API.")


def _agent_scope(value: str, name: str) -> SyncScope:
    if not name or not credentials.agent_credential_matches(name=name, presented=value):
        raise SyncRefused("Unknown host agent credential (agent.name must be the name it was issued for).")
    scope = SyncScope(agent_name=name)
    for connection in CloudConnection.objects.filter(backend__in=handed_out_kinds()):
        runs_dir = connection_runs_dir(connection)
        if agent_name(runs_dir) == name:
            scope.connection_ids.append(connection.pk)
            scope.runs_dirs[connection.pk] = str(runs_dir)
    return scope
