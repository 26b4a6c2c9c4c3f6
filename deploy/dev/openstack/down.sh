#!/bin/bash
# Stop what up.sh started, by recorded PIDs (process groups), never by name; then the private PostgreSQL.
# Leaves the state dir and the machine's RabbitMQ alone. To start over: down.sh && rm -rf $CP_OS_STATE
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/env.sh"; . "$HERE/lib.sh"
[ -d "$S" ] || { echo "nothing to stop ($S does not exist)"; exit 0; }
for s in swift-proxy swift-object swift-container swift-account cinder-volume cinder-scheduler cinder-api nova-compute nova-scheduler nova-conductor nova-api neutron-server placement glance-api keystone; do
  stop_pid $s
done
if pg_running; then
  runuser -u postgres -- $PGBIN/pg_ctl -D $S/pg/data -m fast -w stop >/dev/null && echo "  stopped postgresql"
fi
echo "stopped; state kept in $S"
