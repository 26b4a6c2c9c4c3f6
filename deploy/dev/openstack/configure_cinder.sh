#!/bin/bash
# Cinder (block storage) for the development OpenStack, on a state configured with or without it:
# its database in the private PostgreSQL (running), cinder.conf with our sparse-file backend
# (cinder_driver/cp_sparse_volumes.py: this kernel has no device-mapper for LVM; README), the db sync,
# cinder-api's uWSGI ini, and Nova's [cinder] section. Called by up.sh when $S/.cinder is missing.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/env.sh"
t0=$(date +%s)
mkdir -p $S/etc/cinder $S/cinder/{volumes,lock,conversion} $S/log $S/etc/uwsgi

PSQL="runuser -u postgres -- psql -q -h $S/run -p $CP_OS_PG_PORT -U postgres -v ON_ERROR_STOP=1"
if [ -z "$($PSQL -tAc "SELECT 1 FROM pg_database WHERE datname = 'cinder'")" ]; then
  $PSQL -c "CREATE DATABASE cinder OWNER openstack"
fi

SERVICE() { # $1 = section, $2 = user: keystone password auth of a service user
cat <<EOT
[$1]
region_name = $CP_OS_REGION
auth_type = password
auth_url = http://$CP_OS_HOST:$CP_OS_KEYSTONE_PORT/v3
project_domain_name = Default
user_domain_name = Default
project_name = service
username = $2
password = $CP_OS_PASS
EOT
}
cat > $S/etc/cinder/cinder.conf <<EOT
[DEFAULT]
host = cp-cinder
my_ip = $CP_OS_HOST
state_path = $S/cinder
log_dir = $S/log
transport_url = $CP_OS_TRANSPORT
auth_strategy = keystone
api_paste_config = /etc/cinder/api-paste.ini
rootwrap_config = /etc/cinder/rootwrap.conf
glance_api_servers = http://$CP_OS_HOST:$CP_OS_GLANCE_PORT
image_conversion_dir = $S/cinder/conversion
enabled_backends = sparse
default_volume_type = __DEFAULT__
report_interval = 5
periodic_interval = 10
[database]
connection = $CP_OS_DB/cinder
[oslo_concurrency]
lock_path = $S/cinder/lock
[oslo_messaging_rabbit]
heartbeat_in_pthread = false
[coordination]
backend_url = file://$S/cinder/lock
[sparse]
volume_driver = cp_sparse_volumes.SparseFileVolumeDriver
volume_backend_name = sparse
sparse_volumes_dir = $S/cinder/volumes
$(SERVICE nova cinder)
[keystone_authtoken]
www_authenticate_uri = http://$CP_OS_HOST:$CP_OS_KEYSTONE_PORT
auth_url = http://$CP_OS_HOST:$CP_OS_KEYSTONE_PORT
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = cinder
password = $CP_OS_PASS
region_name = $CP_OS_REGION
EOT
cinder-manage --config-file $S/etc/cinder/cinder.conf db sync >$S/log/cinder-manage.log 2>&1

# cinder-api under uWSGI like the other APIs; the WSGI script reads its config file from its argv (pyargv)
cat > $S/etc/uwsgi/cinder-api.ini <<EOT
[uwsgi]
plugins = python3
http-socket = $CP_OS_HOST:$CP_OS_CINDER_PORT
wsgi-file = /usr/bin/cinder-wsgi
pyargv = --config-file $S/etc/cinder/cinder.conf
master = true
processes = 2
threads = 2
enable-threads = true
lazy-apps = true
die-on-term = true
no-orphans = true
buffer-size = 65535
rem-header = Content-Length
http-auto-chunked = true
http-chunked-input = true
http-raw-body = true
wsgi-manage-chunked-input = true
add-header = Connection: close
name = cinder-api
EOT

# Nova asks Cinder for boot-from-volume and attachments; [cinder] gives it the region and service credentials.
# [service_user]: Nova sends a service token with its own, and Cinder deletes an in-use attachment only for a
# caller holding the `service` role (OSSA-2023-003, bug 2004555; register_catalog.py grants it): without it a
# server's delete leaves its volume attached ("ConflictNovaUsingAttachment") and in-use for ever.
if ! grep -qx "\[cinder\]" $S/etc/nova/nova.conf; then
  SERVICE cinder nova >> $S/etc/nova/nova.conf
  echo "catalog_info = volumev3::publicURL" >> $S/etc/nova/nova.conf
fi
if ! grep -qx "\[service_user\]" $S/etc/nova/nova.conf; then
  SERVICE service_user nova >> $S/etc/nova/nova.conf
  echo "send_service_user_token = true" >> $S/etc/nova/nova.conf
fi
touch $S/.cinder
echo "TIMING configure cinder=$(( $(date +%s)-t0 ))s"
