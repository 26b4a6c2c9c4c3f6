"""What the login pages need to know about the installation's login settings."""

from __future__ import annotations

from django import template

from cloudpivot.accounts.backends import local_accounts_enabled

register = template.Library()


@register.simple_tag
def local_accounts() -> bool:
    """{% local_accounts as enabled %}: whether username/password login and signup are on."""
    return local_accounts_enabled()
