"""Create or update the provider's client and one user with given groups (rerun to change the groups).

python -m tests.oidc_provider.provision --client-id ID --client-secret S --redirect-uri URI \
    --username U --password P --email E --groups g1,g2
"""

from __future__ import annotations

import argparse
import os

import django


def main() -> None:
    parser = argparse.ArgumentParser()
    for option in ("--client-id", "--client-secret", "--redirect-uri", "--username", "--password", "--email"):
        parser.add_argument(option, required=True)
    parser.add_argument("--groups", default="")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.oidc_provider.settings")
    django.setup()
    from django.contrib.auth.models import Group, User
    from oauth2_provider.models import Application

    user, _ = User.objects.get_or_create(username=args.username, defaults={"email": args.email})
    user.email = args.email
    user.set_password(args.password)
    user.save()
    names = [name for name in args.groups.split(",") if name]
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in names])

    app = Application.objects.filter(client_id=args.client_id).first() or Application(client_id=args.client_id)
    app.name = "CloudPivot"
    app.client_type = Application.CLIENT_CONFIDENTIAL
    app.authorization_grant_type = Application.GRANT_AUTHORIZATION_CODE
    app.algorithm = Application.RS256_ALGORITHM
    app.redirect_uris = args.redirect_uri
    app.client_secret = args.client_secret  # hashed on save
    app.skip_authorization = False  # the consent page is part of the flow under test
    app.save()


if __name__ == "__main__":
    main()
