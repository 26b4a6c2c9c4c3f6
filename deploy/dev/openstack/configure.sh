#!/bin/bash
# Configure the development OpenStack from nothing: configs under $CP_OS_STATE/etc, a private
# PostgreSQL cluster (port $CP_OS_PG_PORT) with one DB per service, a RabbitMQ vhost on the machine's
# broker, keystone keys and bootstrap, every db sync, nova cells v2, and an agent-less neutron.
# Called by up.sh only when $CP_OS_STATE/.configured is missing (on a fresh state dir).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/env.sh"
t0=$(date +%s)
mkdir -p $S/{etc,log,pids,run} $S/etc/{keystone,glance,placement,nova,uwsgi,neutron} \
         $S/keystone/{fernet-keys,credential-keys} $S/glance/{images,staging,tasks} \
         $S/nova/{lock,instances} $S/neutron/lock
chmod 755 $S $S/run
chmod 700 $S/keystone/fernet-keys $S/keystone/credential-keys

AUTHTOKEN() { # $1 = service user
cat <<EOT
[keystone_authtoken]
www_authenticate_uri = http://$CP_OS_HOST:$CP_OS_KEYSTONE_PORT
auth_url = http://$CP_OS_HOST:$CP_OS_KEYSTONE_PORT
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = $1
password = $CP_OS_PASS
region_name = $CP_OS_REGION
EOT
}
SERVICE_AUTH() { # $1 = section, $2 = user
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

########## PostgreSQL: private cluster, loopback only, fsync off (throwaway test data) ##########
install -d -o postgres -g postgres $S/pg
chown postgres:postgres $S/run
runuser -u postgres -- $PGBIN/initdb -D $S/pg/data -A trust -U postgres --no-sync -E UTF8 >$S/log/initdb.log
cat >>$S/pg/data/postgresql.conf <<EOT
listen_addresses = '127.0.0.1'
port = $CP_OS_PG_PORT
unix_socket_directories = '$S/run'
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 128MB
EOT
runuser -u postgres -- $PGBIN/pg_ctl -D $S/pg/data -l $S/pg/postgresql.log -w start >/dev/null
PSQL="runuser -u postgres -- psql -q -h $S/run -p $CP_OS_PG_PORT -U postgres -v ON_ERROR_STOP=1"
$PSQL -c "CREATE ROLE openstack LOGIN PASSWORD '$CP_OS_PASS'"
for db in keystone glance placement nova_api nova nova_cell0 neutron; do
  $PSQL -c "CREATE DATABASE $db OWNER openstack"
done
t_pg=$(date +%s)

########## RabbitMQ: a vhost of our own on the machine's broker (guest may use it) ##########
rabbitmqctl -q add_vhost "$CP_OS_RABBIT_VHOST" 2>/dev/null || true
rabbitmqctl -q set_permissions -p "$CP_OS_RABBIT_VHOST" guest '.*' '.*' '.*' >/dev/null

########## Keystone ##########
cat > $S/etc/keystone/keystone.conf <<EOT
[DEFAULT]
log_file = $S/log/keystone.log
[database]
connection = $CP_OS_DB/keystone
[token]
provider = fernet
[fernet_tokens]
key_repository = $S/keystone/fernet-keys/
[fernet_receipts]
key_repository = $S/keystone/fernet-keys/
[credential]
key_repository = $S/keystone/credential-keys/
[cache]
enabled = false
EOT
KM="keystone-manage --config-file $S/etc/keystone/keystone.conf"
$KM db_sync
$KM fernet_setup --keystone-user root --keystone-group root
$KM credential_setup --keystone-user root --keystone-group root
$KM bootstrap --bootstrap-password "$CP_OS_PASS" --bootstrap-username admin \
   --bootstrap-project-name admin --bootstrap-role-name admin --bootstrap-service-name keystone \
   --bootstrap-region-id $CP_OS_REGION --bootstrap-admin-url $CP_OS_AUTH_URL \
   --bootstrap-internal-url $CP_OS_AUTH_URL --bootstrap-public-url $CP_OS_AUTH_URL
t_ks=$(date +%s)

########## Glance (file store) ##########
cat > $S/etc/glance/glance-api.conf <<EOT
[DEFAULT]
bind_host = $CP_OS_HOST
bind_port = $CP_OS_GLANCE_PORT
workers = 1
log_file = $S/log/glance-api.log
enabled_backends = fs:file
[database]
connection = $CP_OS_DB/glance
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = $S/glance/images/
[os_glance_staging_store]
filesystem_store_datadir = $S/glance/staging/
[os_glance_tasks_store]
filesystem_store_datadir = $S/glance/tasks/
[paste_deploy]
flavor = keystone
config_file = /etc/glance/glance-api-paste.ini
[oslo_concurrency]
lock_path = $S/glance
$(AUTHTOKEN glance)
EOT
glance-manage --config-file $S/etc/glance/glance-api.conf db_sync >$S/log/glance-manage.log 2>&1

########## Placement ##########
cat > $S/etc/placement/placement.conf <<EOT
[DEFAULT]
log_file = $S/log/placement.log
[placement_database]
connection = $CP_OS_DB/placement
[api]
auth_strategy = keystone
$(AUTHTOKEN placement)
EOT
placement-manage --config-file $S/etc/placement/placement.conf db sync

########## Nova ##########
cp /etc/nova/api-paste.ini $S/etc/nova/api-paste.ini
cat > $S/etc/nova/nova.conf <<EOT
[DEFAULT]
host = fake-compute-1
my_ip = $CP_OS_HOST
state_path = $S/nova
instances_path = $S/nova/instances
log_dir = $S/log
transport_url = $CP_OS_TRANSPORT
compute_driver = fake.FakeDriver
enabled_apis = osapi_compute
osapi_compute_listen = $CP_OS_HOST
osapi_compute_listen_port = $CP_OS_NOVA_PORT
osapi_compute_workers = 1
metadata_listen = $CP_OS_HOST
heal_instance_info_cache_interval = -1
sync_power_state_interval = 30
periodic_fuzzy_delay = 0
# one compute host: a resize (and its confirm) can only happen on the host the server is on
allow_resize_to_same_host = True
[api]
auth_strategy = keystone
[wsgi]
api_paste_config = $S/etc/nova/api-paste.ini
[conductor]
workers = 1
[scheduler]
workers = 1
discover_hosts_in_cells_interval = 5
[oslo_concurrency]
lock_path = $S/nova/lock
[vnc]
enabled = false
[spice]
enabled = false
[glance]
region_name = $CP_OS_REGION
$(SERVICE_AUTH placement placement)
$(SERVICE_AUTH neutron neutron)
$(AUTHTOKEN nova)
EOT
# DB credentials in a file nova-compute does NOT get ("No DB access allowed in nova-compute")
cat > $S/etc/nova/nova-db.conf <<EOT
[api_database]
connection = $CP_OS_DB/nova_api
[database]
connection = $CP_OS_DB/nova
EOT
NM="nova-manage --config-file $S/etc/nova/nova.conf --config-file $S/etc/nova/nova-db.conf"
$NM api_db sync 2>>$S/log/nova-manage.err
$NM cell_v2 map_cell0 --database_connection $CP_OS_DB/nova_cell0 2>>$S/log/nova-manage.err
$NM cell_v2 create_cell --name cell1 2>>$S/log/nova-manage.err >/dev/null
$NM db sync 2>>$S/log/nova-manage.err
t_nv=$(date +%s)

########## Neutron: real neutron-server, no agents (Nova needs a network endpoint even for networks='none') ##########
cat > $S/etc/neutron/neutron.conf <<EOT
[DEFAULT]
bind_host = $CP_OS_HOST
bind_port = $CP_OS_NEUTRON_PORT
core_plugin = ml2
# 'router' imports l3_db; without it GET /v2.0/ports fails (Port has no port_forwardings)
service_plugins = router
auth_strategy = keystone
transport_url = $CP_OS_TRANSPORT
api_paste_config = /etc/neutron/api-paste.ini
api_workers = 1
rpc_workers = 1
rpc_state_report_workers = 0
state_path = $S/neutron
log_file = $S/log/neutron-server.log
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
dhcp_agent_notification = false
[database]
connection = $CP_OS_DB/neutron
[oslo_concurrency]
lock_path = $S/neutron/lock
$(AUTHTOKEN neutron)
EOT
cat > $S/etc/neutron/ml2_conf.ini <<EOT
[ml2]
type_drivers = flat
tenant_network_types =
mechanism_drivers =
extension_drivers =
[ml2_type_flat]
flat_networks = *
EOT
neutron-db-manage --config-file $S/etc/neutron/neutron.conf --config-file $S/etc/neutron/ml2_conf.ini \
  upgrade heads > $S/log/neutron-db-manage.log 2>&1

########## uwsgi inis (keystone, placement, nova-api) on loopback http sockets ##########
UW() { # name port wsgi-file env
cat <<EOT
[uwsgi]
plugins = python3
http-socket = $CP_OS_HOST:$2
wsgi-file = $3
env = $4
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
name = $1
EOT
}
UW keystone $CP_OS_KEYSTONE_PORT /usr/bin/keystone-wsgi-public OS_KEYSTONE_CONFIG_FILES=$S/etc/keystone/keystone.conf > $S/etc/uwsgi/keystone.ini
UW placement $CP_OS_PLACEMENT_PORT /usr/bin/placement-api OS_PLACEMENT_CONFIG_DIR=$S/etc/placement > $S/etc/uwsgi/placement.ini
UW nova-api $CP_OS_NOVA_PORT /usr/bin/nova-api-wsgi "OS_NOVA_CONFIG_DIR=$S/etc/nova" > $S/etc/uwsgi/nova-api.ini
# nova-api-wsgi loads the paste pipeline from the FIRST file of this list
echo "env = OS_NOVA_CONFIG_FILES=api-paste.ini;nova.conf;nova-db.conf" >> $S/etc/uwsgi/nova-api.ini

########## clouds.yaml for CloudPivot (admin of project 'admin'; mode 600) ##########
umask 077
cat > $CP_OS_CLOUDS_YAML <<EOT
clouds:
  $CP_OS_CLOUD:
    auth:
      auth_url: $CP_OS_AUTH_URL
      username: admin
      password: $CP_OS_PASS
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: $CP_OS_REGION
    identity_api_version: 3
EOT
umask 022
touch $S/.configured
echo "TIMING configure total=$(( $(date +%s)-t0 ))s pg=$((t_pg-t0))s keystone=$((t_ks-t_pg))s nova=$((t_nv-t_ks))s"
