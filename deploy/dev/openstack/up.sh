#!/bin/bash
# CloudPivot's development OpenStack (Zed, Debian 12 packages, Nova's fake virt driver): idempotent.
#   1. installs the Debian packages if any is missing          (install.sh)
#   2. configures everything if $CP_OS_STATE/.configured is missing (configure.sh)
#   3. starts each service that is not running, waits until the hypervisor is up
#   4. makes the flavor and image CloudPivot's tests use, and prints where things are
# Swift (the object store) by configure_swift.sh, likewise.
# Cinder (block storage, our sparse-file backend: README) is configured by configure_cinder.sh, on a fresh
# state and on one configured before Cinder came (then nova-api and nova-compute restart to read [cinder]).
# Loopback only. Reuses the machine's RabbitMQ (vhost $CP_OS_RABBIT_VHOST); private PostgreSQL on $CP_OS_PG_PORT.
# Stop with down.sh; start over with: down.sh && rm -rf $CP_OS_STATE
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/env.sh"; . "$HERE/lib.sh"
T0=$(date +%s)
lap() { echo "TIMING up $1 at +$(( $(date +%s) - T0 ))s"; }
[ "$(id -u)" = 0 ] || { echo "up.sh must run as root (apt, runuser postgres)"; exit 1; }

# One up.sh at a time (tests and make may race). `flock -o` holds the lock in the flock process and closes
# it for this script: services started below must not inherit the lock, or the next up.sh waits forever.
if [ -z "${CP_OS_UP_LOCKED:-}" ]; then
  exec env CP_OS_UP_LOCKED=1 flock -o "${CP_OS_STATE%/}-up.flock" "$0" "$@"
fi

"$HERE/install.sh"
lap packages

# the machine's RabbitMQ
if ! (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  echo "  RabbitMQ is down; starting it"
  rabbitmq-server -detached
  wait_port 5672 90
fi

if [ ! -e "$S/.configured" ]; then
  if [ -e "$S" ]; then
    echo "  $S is half-configured (an earlier run failed); starting it over"
    "$HERE/down.sh" >/dev/null 2>&1 || true
    rm -rf "$S"
  fi
  "$HERE/configure.sh"
  lap configured
fi

# Two settings the uWSGI services need, applied to states configured before them too (a service that
# runs without them is restarted below):
# - uWSGI's http-socket closes the connection after each answer but does not say so; a client that
#   reuses it gets "Connection reset by peer" under load. `Connection: close` tells clients not to.
# - nova-api's AMQP heartbeat must run in a native thread (oslo.messaging's advice for WSGI services),
#   or RabbitMQ drops an idle worker's connection and the RPC replies sent to it are lost: console logs
#   and diagnostics then fail after 60 s (MessagingTimeout), about every other call.
for svc in keystone placement nova-api; do
  if ! grep -qx "add-header = Connection: close" $S/etc/uwsgi/$svc.ini; then
    echo "add-header = Connection: close" >> $S/etc/uwsgi/$svc.ini
    if pid_alive $svc; then stop_pid $svc; fi
  fi
done
if ! grep -q "nova-api-rpc.conf" $S/etc/uwsgi/nova-api.ini; then
  printf '[oslo_messaging_rabbit]\nheartbeat_in_pthread = true\n' > $S/etc/nova/nova-api-rpc.conf
  sed -i 's|^env = OS_NOVA_CONFIG_FILES=.*|env = OS_NOVA_CONFIG_FILES=api-paste.ini;nova.conf;nova-db.conf;nova-api-rpc.conf|' \
    $S/etc/uwsgi/nova-api.ini
  if pid_alive nova-api; then stop_pid nova-api; fi
fi

# Resize on the one compute host (states configured before this setting get it here): nova-api reads it
# (the scheduler is told to ignore the server's own host otherwise, and finds none).
if ! grep -qx "allow_resize_to_same_host = True" $S/etc/nova/nova.conf; then
  sed -i 's|^\[DEFAULT\]$|[DEFAULT]\nallow_resize_to_same_host = True|' $S/etc/nova/nova.conf
  if pid_alive nova-api; then stop_pid nova-api; fi
fi

pg_running || runuser -u postgres -- $PGBIN/pg_ctl -D $S/pg/data -l $S/pg/postgresql.log -w start >/dev/null
if [ ! -e "$S/.cinder" ]; then   # a fresh state, or one configured before Cinder: its DB, config, Nova's [cinder]
  "$HERE/configure_cinder.sh"
  rm -f $S/.catalog               # register_catalog.py (idempotent) adds the cinder user and volumev3/block-storage
  for svc in nova-api nova-compute; do if pid_alive $svc; then stop_pid $svc; fi; done
  lap cinder-configured
fi
if [ ! -e "$S/.swift" ]; then    # a fresh state, or one configured before Swift: rings, configs, the catalog entry
  "$HERE/configure_swift.sh"
  rm -f $S/.catalog               # register_catalog.py (idempotent) adds the swift user and object-store
  lap swift-configured
fi
rabbitmqctl -q list_vhosts | grep -qx "$CP_OS_RABBIT_VHOST" || {
  rabbitmqctl -q add_vhost "$CP_OS_RABBIT_VHOST"
  rabbitmqctl -q set_permissions -p "$CP_OS_RABBIT_VHOST" guest '.*' '.*' '.*' >/dev/null
}

pid_alive keystone || start_bg keystone uwsgi --ini $S/etc/uwsgi/keystone.ini
wait_http "http://$CP_OS_HOST:$CP_OS_KEYSTONE_PORT/v3" 60
if [ ! -e $S/.catalog ]; then /usr/bin/python3 "$HERE/register_catalog.py" && touch $S/.catalog; fi
lap keystone+catalog

fresh_neutron=0
pid_alive glance-api || start_bg glance-api glance-api --config-file $S/etc/glance/glance-api.conf
pid_alive placement || start_bg placement uwsgi --ini $S/etc/uwsgi/placement.ini
pid_alive neutron-server || { start_bg neutron-server neutron-server \
    --config-file $S/etc/neutron/neutron.conf --config-file $S/etc/neutron/ml2_conf.ini; fresh_neutron=1; }
NC="--config-file $S/etc/nova/nova.conf"               # nova-compute: no DB credentials
NCDB="$NC --config-file $S/etc/nova/nova-db.conf"      # api, conductor, scheduler, nova-manage
pid_alive nova-api || start_bg nova-api uwsgi --ini $S/etc/uwsgi/nova-api.ini
pid_alive nova-conductor || start_bg nova-conductor nova-conductor $NCDB
pid_alive nova-scheduler || start_bg nova-scheduler nova-scheduler $NCDB
pid_alive nova-compute || start_bg nova-compute nova-compute $NC
CC="--config-file $S/etc/cinder/cinder.conf"
pid_alive cinder-api || start_bg cinder-api uwsgi --ini $S/etc/uwsgi/cinder-api.ini
pid_alive cinder-scheduler || start_bg cinder-scheduler cinder-scheduler $CC
# the volume driver is ours (cinder_driver/), found on PYTHONPATH
fresh_cinder=0
pid_alive cinder-volume || { start_bg cinder-volume env PYTHONPATH="$HERE/cinder_driver" cinder-volume $CC; fresh_cinder=1; }
for kind in account container object; do
  pid_alive swift-$kind || start_bg swift-$kind swift-$kind-server $S/etc/swift/$kind-server.conf -v
done
pid_alive swift-proxy || start_bg swift-proxy swift-proxy-server $S/etc/swift/proxy-server.conf -v
wait_http "http://$CP_OS_HOST:$CP_OS_GLANCE_PORT/" 60
wait_http "http://$CP_OS_HOST:$CP_OS_PLACEMENT_PORT/" 60
wait_http "http://$CP_OS_HOST:$CP_OS_NEUTRON_PORT/" 90
if [ $fresh_neutron = 1 ]; then
  # neutron 21 + SQLAlchemy 1.4: a worker whose first query is GET /v2.0/ports fails (mappers not
  # configured yet). Any other query first (networks) configures them.
  openstack network list >/dev/null
  openstack port list >/dev/null
fi
wait_http "http://$CP_OS_HOST:$CP_OS_NOVA_PORT/" 90
wait_http "http://$CP_OS_HOST:$CP_OS_CINDER_PORT/" 90
wait_http "http://$CP_OS_HOST:$CP_OS_SWIFT_PORT/healthcheck" 60
lap services

# nova-compute registered in placement and its host mapped into cell1
ok=0
for _ in $(seq 1 45); do
  if [ "$(openstack hypervisor list -f value -c State 2>/dev/null | grep -c up)" -ge 1 ]; then ok=1; break; fi
  nova-manage $NCDB cell_v2 discover_hosts >/dev/null 2>&1 || true
  sleep 2
done
[ $ok = 1 ] || { echo "FAILED: nova-compute/hypervisor not up (see $S/log/nova-compute.log)"; exit 1; }
lap hypervisor

# a cinder-volume started now has reported its backend (the scheduler places volumes only on a service that is up)
ok=$((1 - fresh_cinder))
for _ in $(seq 1 45); do
  [ $ok = 1 ] && break
  if openstack volume service list --service cinder-volume -f value -c State 2>/dev/null | grep -qx up; then ok=1; break; fi
  sleep 2
done
[ $ok = 1 ] || { echo "FAILED: cinder-volume not up (see $S/log/cinder-volume.log)"; exit 1; }
lap cinder-volume

# what CloudPivot's tests boot: a tiny flavor, a 4 KiB raw image, and a flavor whose disk no host has
# (within quota, so Nova accepts it and the scheduler puts the server in ERROR: "No valid host was found")
# (one list call: each `openstack` command costs seconds of CPU to start)
flavors=$(openstack flavor list --all -f value -c Name)
have() { grep -qx "$1" <<<"$flavors"; }
have $CP_OS_FLAVOR || openstack flavor create --ram 64 --disk 1 --vcpus 1 $CP_OS_FLAVOR >/dev/null
have cp.small || openstack flavor create --ram 128 --disk 1 --vcpus 1 cp.small >/dev/null   # what a resize goes to
have cp.nohost || openstack flavor create --ram 64 --disk 5000000 --vcpus 1 cp.nohost >/dev/null
if [ ! -e $S/.quotas ]; then   # room for the benchmarks (100+ servers at once)
  openstack quota set --instances 1000 --cores 4000 --ram 4096000 admin && touch $S/.quotas
fi
if [ ! -e $S/.volume-quotas ]; then   # Cinder's default of 10 volumes is less than two test runs side by side hold
  openstack quota set --volumes 500 --snapshots 500 --gigabytes 5000 admin && touch $S/.volume-quotas
fi
if ! openstack image show $CP_OS_IMAGE >/dev/null 2>&1; then
  head -c 4096 /dev/zero > $S/fake-image.raw
  openstack image create --disk-format raw --container-format bare --file $S/fake-image.raw $CP_OS_IMAGE >/dev/null
fi
lap ready
cat <<EOT
OpenStack (fake hypervisor) is up on 127.0.0.1:
  keystone  $CP_OS_AUTH_URL   (admin / $CP_OS_PASS, project admin)
  nova :$CP_OS_NOVA_PORT  glance :$CP_OS_GLANCE_PORT  placement :$CP_OS_PLACEMENT_PORT  neutron :$CP_OS_NEUTRON_PORT  cinder :$CP_OS_CINDER_PORT
  swift :$CP_OS_SWIFT_PORT (tempurl, s3api; one node, one replica in $S/swift)
  postgres :$CP_OS_PG_PORT (private)   rabbitmq 127.0.0.1:5672 vhost $CP_OS_RABBIT_VHOST
  clouds.yaml  $CP_OS_CLOUDS_YAML  (cloud "$CP_OS_CLOUD"); flavor $CP_OS_FLAVOR (resize to cp.small), image $CP_OS_IMAGE, networks none
  resize       allow_resize_to_same_host = True (one compute host); block storage: Cinder, sparse files in $S/cinder/volumes (README)
  state, logs  $S  (logs in $S/log)
  CLI          . $HERE/env.sh && openstack server list
  stop         $HERE/down.sh
EOT
echo "TIMING up total=$(( $(date +%s) - T0 ))s"
