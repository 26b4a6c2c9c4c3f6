#!/bin/bash
# Swift (the object store) for the development OpenStack, on a state configured with or without it: one
# storage node with one replica in $S/swift (a directory: mount_check off), the account, container and object
# rings, and a proxy with Keystone auth and the temporary-URL and S3 middlewares. Called by up.sh when
# $S/.swift is missing. Every Swift server logs to $S/log (run with -v) and listens on 127.0.0.1 only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/env.sh"
t0=$(date +%s)
SW=$S/etc/swift
mkdir -p $SW $S/swift/node/d1 $S/swift/recon $S/swift/run $S/log

# swift.conf is read from /etc/swift whatever swift_dir says (swift.common.utils.SWIFT_CONF_FILE): the
# package leaves none, so the hash suffix is this machine's (a dev store: nothing outlives $S anyway).
if [ ! -e /etc/swift/swift.conf ]; then
  mkdir -p /etc/swift
  cat > /etc/swift/swift.conf <<EOT
[swift-hash]
swift_hash_path_suffix = cloudpivot-dev-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
swift_hash_path_prefix =
[storage-policy:0]
name = Policy-0
default = yes
EOT
fi

COMMON="bind_ip = $CP_OS_HOST
devices = $S/swift/node
mount_check = false
swift_dir = $SW
user = root
workers = 0
recon_cache_path = $S/swift/recon
log_level = INFO"
for kind in account container object; do
  case $kind in account) port=$CP_OS_SWIFT_ACCOUNT_PORT ;; container) port=$CP_OS_SWIFT_CONTAINER_PORT ;;
                object) port=$CP_OS_SWIFT_OBJECT_PORT ;; esac
  cat > $SW/$kind-server.conf <<EOT
[DEFAULT]
bind_port = $port
$COMMON
[pipeline:main]
pipeline = $kind-server
[app:$kind-server]
use = egg:swift#$kind
EOT
  if [ ! -e $SW/$kind.ring.gz ]; then
    (cd $SW && swift-ring-builder $kind.builder create 8 1 1 >/dev/null &&
      swift-ring-builder $kind.builder add "r1z1-$CP_OS_HOST:$port/d1" 100 >/dev/null &&
      swift-ring-builder $kind.builder rebalance >/dev/null)
  fi
done

# tempurl before auth, so a temporary URL needs no token; authtoken with delay_auth_decision for the same
# reason. No memcached here: no `cache` or `ratelimit` filter (the token cache is authtoken's own, in memory).
cat > $SW/proxy-server.conf <<EOT
[DEFAULT]
bind_ip = $CP_OS_HOST
bind_port = $CP_OS_SWIFT_PORT
swift_dir = $SW
user = root
workers = 0
log_level = INFO
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging listing_formats tempurl s3api s3token authtoken keystoneauth copy slo dlo proxy-logging proxy-server
[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:tempurl]
use = egg:swift#tempurl
allowed_digests = sha256 sha512
[filter:s3api]
use = egg:swift#s3api
[filter:s3token]
use = egg:swift#s3token
auth_uri = http://$CP_OS_HOST:$CP_OS_KEYSTONE_PORT/v3
[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory
www_authenticate_uri = http://$CP_OS_HOST:$CP_OS_KEYSTONE_PORT
auth_url = http://$CP_OS_HOST:$CP_OS_KEYSTONE_PORT
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = swift
password = $CP_OS_PASS
region_name = $CP_OS_REGION
delay_auth_decision = True
[filter:keystoneauth]
use = egg:swift#keystoneauth
operator_roles = admin, member
reseller_admin_role = ResellerAdmin
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
EOT
touch $S/.swift
echo "TIMING configure swift=$(( $(date +%s)-t0 ))s"
