# Settings of CloudPivot's development OpenStack. Source me (up.sh, down.sh and the tests do).
# Everything lives under $CP_OS_STATE; every service listens on 127.0.0.1 only.
export CP_OS_STATE=${CP_OS_STATE:-/tmp/cloudpivot-openstack}
export CP_OS_HOST=127.0.0.1
export CP_OS_PG_PORT=${CP_OS_PG_PORT:-5433}            # private PostgreSQL cluster (the shared one is 5432)
export CP_OS_KEYSTONE_PORT=${CP_OS_KEYSTONE_PORT:-5000}
export CP_OS_GLANCE_PORT=${CP_OS_GLANCE_PORT:-9292}
export CP_OS_PLACEMENT_PORT=${CP_OS_PLACEMENT_PORT:-8778}
export CP_OS_NOVA_PORT=${CP_OS_NOVA_PORT:-8774}
export CP_OS_NEUTRON_PORT=${CP_OS_NEUTRON_PORT:-9696}
export CP_OS_CINDER_PORT=${CP_OS_CINDER_PORT:-8776}
export CP_OS_SWIFT_PORT=${CP_OS_SWIFT_PORT:-8080}      # the Swift proxy; its servers below
export CP_OS_SWIFT_OBJECT_PORT=${CP_OS_SWIFT_OBJECT_PORT:-6200}
export CP_OS_SWIFT_CONTAINER_PORT=${CP_OS_SWIFT_CONTAINER_PORT:-6201}
export CP_OS_SWIFT_ACCOUNT_PORT=${CP_OS_SWIFT_ACCOUNT_PORT:-6202}
export CP_OS_PASS=${CP_OS_PASS:-secret}                # every OpenStack password (admin, service users, DB)
export CP_OS_REGION=RegionOne
# The machine's RabbitMQ (127.0.0.1:5672, guest/guest), in a vhost of our own
export CP_OS_RABBIT_VHOST=${CP_OS_RABBIT_VHOST:-cloudpivot-openstack}
export CP_OS_TRANSPORT="rabbit://guest:guest@127.0.0.1:5672/${CP_OS_RABBIT_VHOST}"
export CP_OS_DB="postgresql+psycopg2://openstack:${CP_OS_PASS}@${CP_OS_HOST}:${CP_OS_PG_PORT}"
export CP_OS_AUTH_URL="http://${CP_OS_HOST}:${CP_OS_KEYSTONE_PORT}/v3"
export CP_OS_CLOUDS_YAML=$CP_OS_STATE/clouds.yaml
export CP_OS_CLOUD=cloudpivot-dev                     # the entry in clouds.yaml
export CP_OS_FLAVOR=cp.tiny CP_OS_IMAGE=cp-runner-fake
export PGBIN=/usr/lib/postgresql/15/bin
# Debian's OpenStack services are written for /usr/bin/python3, not a venv's
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
# openstack CLI (Debian's python3-openstackclient) as the admin
export OS_AUTH_URL=$CP_OS_AUTH_URL OS_USERNAME=admin OS_PASSWORD=$CP_OS_PASS OS_PROJECT_NAME=admin \
       OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default OS_IDENTITY_API_VERSION=3 OS_REGION_NAME=$CP_OS_REGION
unset OS_CLOUD
S=$CP_OS_STATE
