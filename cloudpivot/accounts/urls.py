"""Pages of the accounts side: personal settings (/settings/) and projects (/projects/, their secrets included)."""

from django.urls import path

from cloudpivot.accounts.portal import project_pages, secret_pages
from cloudpivot.accounts.portal import settings_pages as personal_settings

app_name = "accounts"
urlpatterns = [
    # Personal settings: API tokens, SSH public keys and email notifications.
    path("settings/", personal_settings.settings_page, name="settings"),
    path("settings/tokens/", personal_settings.token_create, name="token_create"),
    path("settings/tokens/<int:token_id>/revoke", personal_settings.token_revoke, name="token_revoke"),
    path("settings/ssh-keys/", personal_settings.ssh_key_add, name="ssh_key_add"),
    path("settings/ssh-keys/<int:key_id>/delete", personal_settings.ssh_key_remove, name="ssh_key_remove"),
    path("settings/notifications", personal_settings.email_preferences_save, name="email_preferences"),
    # Projects: members and roles, quotas with use, links to webhooks.
    path("projects/", project_pages.project_list, name="project_list"),
    path("projects/<slug:slug>/", project_pages.project_detail, name="project_detail"),
    path("projects/<slug:slug>/members/", project_pages.member_add, name="member_add"),
    path("projects/<slug:slug>/members/<int:membership_id>/", project_pages.member_act, name="member_act"),
    # Project secrets: names for members, add and delete for project admins; values never leave.
    path("projects/<slug:slug>/secrets/", secret_pages.secret_list, name="secret_list"),
    path("projects/<slug:slug>/secrets/new", secret_pages.secret_add, name="secret_add"),
    path("projects/<slug:slug>/secrets/<slug:name>/delete", secret_pages.secret_remove, name="secret_remove"),
]
