"""The audit catalogue: every action an AuditEntry may carry, with who can cause it (docs/audit.md: the same
list, with what each entry records and what it never does).

A request's action is the name of the view that answered it (Django's `view_name`); the Django admin's are one
family (`admin:<app>_<model>_<step>`). The system's own entries (debug holds, cloud refreshes, group sync …)
name theirs. An action outside the catalogue is still recorded (an audit is never dropped), marked
`uncatalogued` and logged as an error. tests/cloudpivot/test_audit_catalogue.py fails on a view that takes writes
or a system step's action that is missing here, and on a difference between this list and docs/audit.md.
"""

from __future__ import annotations

SUBMITTER = "a submitter or admin of the project"
OWNER_OR_ADMIN = "the task's owner or an admin of its project"
ANYONE = "anyone signed in"
SELF = "the user, for themself"
PROJECT_ADMIN = "an admin of the project"
NOBODY = "CloudPivot itself"

# action → who can cause it
ACTIONS: dict[str, str] = {
    # tasks: the API and the pages
    "tasks-api:task-list": f"{SUBMITTER} (submit a task; a dry run is not a change but is a POST)",
    "tasks-api:task-cancel": OWNER_OR_ADMIN,
    "tasks-api:task-retry": OWNER_OR_ADMIN,
    "tasks-api:task-release-hold": OWNER_OR_ADMIN,
    "tasks:task_create": f"{SUBMITTER} (a task, or a set with Run as a set)",
    "tasks:task_fit": f"{SUBMITTER} (the form's verdict; changes nothing)",
    "tasks:task_cancel": OWNER_OR_ADMIN,
    "tasks:task_retry": OWNER_OR_ADMIN,
    "tasks:task_release_hold": OWNER_OR_ADMIN,
    "tasks:debug-hold-started": f"{NOBODY}, when a failed attempt is kept for debugging",
    "tasks:debug-hold-released": OWNER_OR_ADMIN,
    "tasks:debug-hold-expired": f"{NOBODY}, at the hold's end",
    # task sets
    "tasksets-api:task-set-list": f"{SUBMITTER} (submit a set)",
    "tasksets-api:task-set-cancel": "the set's owner or an admin of its project",
    "tasksets-api:task-set-retry-failed": "the set's owner or an admin of its project",
    "tasksets-api:task-set-detail": "the set's owner or an admin of its project (delete)",
    "tasksets:set_cancel": "the set's owner or an admin of its project",
    "tasksets:set_retry_failed": "the set's owner or an admin of its project",
    # clouds
    "clusters:cloud_check": "staff (the cloud page's Check now)",
    "clusters:connection-delete": "staff, deleting a connection in the admin",
    # instances, volumes, snapshots, orphans
    "resources-api:instance-list": f"{SUBMITTER} (launch an instance)",
    "resources-api:instance-actions": "the instance's owner or an admin of its project",
    "resources-api:snapshot-detail": "the snapshot's owner or an admin of its project (delete)",
    "resources-api:snapshot-restore": "the snapshot's owner or an admin of its project",
    "resources-api:volume-reclaim": PROJECT_ADMIN,
    "resources:instance_launch": SUBMITTER,
    "resources:instance_fit": f"{SUBMITTER} (the form's verdict; changes nothing)",
    "resources:instance_act": "the instance's owner or an admin of its project",
    "resources:volume_reclaim": PROJECT_ADMIN,
    "resources:instance-unknown": f"{NOBODY}, when the cloud no longer shows an instance",
    "resources:instance-status": f"{NOBODY}, when the cloud changed an instance's status behind CloudPivot",
    "resources:instance-guest-stopped": f"{NOBODY}, when an instance's guest powered itself off",
    "resources:instance-readiness": f"{NOBODY}, when an instance's guest starts or stops answering",
    "resources:instance-owner-change": "an admin of the project (hand an instance to another member)",
    "resources:operation-lost": f"{NOBODY}, when a worker stopped before an operation's outcome was seen",
    "resources:volume-reclaimed": PROJECT_ADMIN,
    "resources:snapshot-pruned": f"{NOBODY}, a schedule's retention",
    "resources:orphan-delete": "staff, from the orphan report",
    "resources:orphan-adopt": "staff, from the orphan report",
    # notifications
    "notifications-api:email-preferences": SELF,
    "notifications-api:webhook-list": f"{PROJECT_ADMIN} (add a webhook)",
    "notifications-api:webhook-detail": f"{PROJECT_ADMIN} (change or delete a webhook)",
    "notifications-api:webhook-redeliver": PROJECT_ADMIN,
    "notifications-api:webhook-rotate-secret": PROJECT_ADMIN,
    "notifications:webhook_create": PROJECT_ADMIN,
    "notifications:webhook_act": PROJECT_ADMIN,
    # accounts: tokens, keys, secrets, members
    "accounts-api:token-list": f"{SELF} (make a token)",
    "accounts-api:token-detail": f"{SELF} (revoke a token)",
    "accounts-api:ssh-key-list": f"{SELF} (add an SSH key)",
    "accounts-api:ssh-key-detail": f"{SELF} (remove an SSH key)",
    "accounts-api:secret-list": f"{PROJECT_ADMIN} (add a project secret)",
    "accounts-api:secret-detail": f"{PROJECT_ADMIN} (replace or remove a project secret)",
    "accounts:token_create": SELF,
    "accounts:token_revoke": SELF,
    "accounts:ssh_key_add": SELF,
    "accounts:ssh_key_remove": SELF,
    "accounts:email_preferences": SELF,
    "accounts:member_add": PROJECT_ADMIN,
    "accounts:member_act": PROJECT_ADMIN,
    "accounts:secret_add": PROJECT_ADMIN,
    "accounts:secret_remove": PROJECT_ADMIN,
    "accounts:membership-grant": f"{NOBODY}, at a login whose identity provider's groups grant a project role",
    "accounts:membership-change": f"{NOBODY}, at a login whose groups change a project role",
    "accounts:membership-revoke": f"{NOBODY}, at a login whose groups no longer grant a project role",
    # signing in (allauth): audited once the request carries a signed-in user
    "account_login": ANYONE,
    "account_logout": ANYONE,
    "account_signup": "a new user, where signup is open",
    "account_reauthenticate": ANYONE,
    "account_request_reauthentication_code": ANYONE,
    "account_confirm_reauthentication_code": ANYONE,
    "account_email": SELF,
    "account_change_password": SELF,
    "account_set_password": SELF,
    "account_reset_password": ANYONE,
    "account_reset_password_from_key": ANYONE,
    "account_confirm_login_code": ANYONE,
    "account_confirm_email": ANYONE,
    "account_email_verification_sent": ANYONE,
    "socialaccount_signup": "a new user signing up through a provider",
    "socialaccount_connections": SELF,
    "github_login": ANYONE,
    "github_callback": ANYONE,
    "gitlab_login": ANYONE,
    "gitlab_callback": ANYONE,
    "gitea_login": ANYONE,
    "gitea_callback": ANYONE,
    "openid_connect_login": ANYONE,
    "openid_connect_callback": ANYONE,
    "django.views.generic.base.RedirectView": f"{ANYONE} (a retired sign-in page that redirects)",
    # what answers no view
    "cloudpivot.urls.api_not_found": f"{ANYONE} (a write to an /api/ path that does not exist: refused, 404)",
    "": f"{ANYONE} (a write to a path no view answers: refused, 404)",
}

# action prefix → who can cause it
FAMILIES: dict[str, str] = {
    "admin:": "staff in the Django admin (admin:<app>_<model>_<add|change|delete|…>; a bulk action's name is "
    "in the entry's details)",
}


def catalogued(action: str) -> bool:
    return action in ACTIONS or any(action.startswith(prefix) for prefix in FAMILIES)
