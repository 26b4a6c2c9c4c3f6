#!/usr/bin/python3
"""Create the 'service' project, the service users and the catalog in keystone. Idempotent.

Runs with Debian's python3 (python3-openstacksdk comes with nova). Env: env.sh.
"""

import os

import openstack

H = os.environ["CP_OS_HOST"]
PASS = os.environ["CP_OS_PASS"]
REGION = os.environ["CP_OS_REGION"]
conn = openstack.connect(
    auth_url=os.environ["OS_AUTH_URL"],
    username="admin",
    password=PASS,
    project_name="admin",
    user_domain_name="Default",
    project_domain_name="Default",
    region_name=REGION,
)
idp = conn.identity
services = [
    ("glance", "image", f"http://{H}:{os.environ['CP_OS_GLANCE_PORT']}"),
    ("placement", "placement", f"http://{H}:{os.environ['CP_OS_PLACEMENT_PORT']}"),
    ("nova", "compute", f"http://{H}:{os.environ['CP_OS_NOVA_PORT']}/v2.1"),
    ("neutron", "network", f"http://{H}:{os.environ['CP_OS_NEUTRON_PORT']}"),
    # Cinder under both names: Nova looks for volumev3, openstacksdk for block-storage (or its aliases)
    ("cinderv3", "volumev3", f"http://{H}:{os.environ['CP_OS_CINDER_PORT']}/v3/%(project_id)s"),
    ("cinder", "block-storage", f"http://{H}:{os.environ['CP_OS_CINDER_PORT']}/v3/%(project_id)s"),
    ("swift", "object-store", f"http://{H}:{os.environ['CP_OS_SWIFT_PORT']}/v1/AUTH_%(project_id)s"),
]
domain = idp.find_domain("default")
project = idp.find_project("service", domain_id=domain.id) or idp.create_project(
    name="service", domain_id=domain.id, description="service users"
)
admin_role = idp.find_role("admin")
# `service`: what Cinder asks of the service token Nova sends to delete an in-use attachment (OSSA-2023-003)
service_role = idp.find_role("service") or idp.create_role(name="service")
# Swift's keystoneauth lets `member` (and admin) operate their project's account
idp.find_role("member") or idp.create_role(name="member")
for name in ("glance", "placement", "nova", "neutron", "cinder", "swift"):
    user = idp.find_user(name, domain_id=domain.id) or idp.create_user(
        name=name, password=PASS, domain_id=domain.id, default_project_id=project.id
    )
    idp.assign_project_role_to_user(project, user, admin_role)
    idp.assign_project_role_to_user(project, user, service_role)
for name, stype, url in services:
    svc = next((s for s in idp.services() if s.type == stype), None) or idp.create_service(
        name=name, type=stype, is_enabled=True
    )
    have = {e.interface for e in idp.endpoints(service_id=svc.id)}
    for iface in ("public", "internal", "admin"):
        if iface not in have:
            idp.create_endpoint(service_id=svc.id, interface=iface, url=url, region_id=REGION)
print("  catalog:", ", ".join(sorted(s.type for s in idp.services())))
