"""Orphans: what CloudPivot marked in each cloud compared with what its database expects (docs/orphans.md).

`listers/` read each cloud kind through that cloud package's public client; `report` classifies
(orphan / stale / missing, protection); `scan` stores the findings; `actions` delete or adopt after
re-checking the cloud; `admin` shows them. The table stays `resources_orphanfinding` (it was born in
the resources app; migrations moved only Django's state).
"""
