#!/bin/bash
# Install the Debian 12 packages of a minimal OpenStack (Zed): keystone, glance, placement,
# nova (api, conductor, scheduler, compute with the fake driver), an agent-less neutron-server, cinder and
# swift (the object store: one node, one replica; configure_swift.sh).
# Skips apt entirely when every package is already installed. Services must NOT auto-start:
# Debian's invoke-rc.d honours /usr/sbin/policy-rc.d (exit 101); we create one only if missing.
set -euo pipefail
PKGS="postgresql-15 rabbitmq-server keystone glance-api placement-api nova-api nova-conductor
nova-scheduler nova-compute nova-compute-ironic python3-openstackclient neutron-server uwsgi-plugin-python3 bc curl
cinder-api cinder-scheduler cinder-volume
swift swift-proxy swift-account swift-container swift-object python3-swiftclient"
missing=()
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then echo "packages: all installed"; exit 0; fi
echo "packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
CREATED_POLICY=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; CREATED_POLICY=1
fi
trap '[ "$CREATED_POLICY" = 1 ] && rm -f /usr/sbin/policy-rc.d' EXIT
# every openstack-pkg-tools debconf question defaults to false; being explicit anyway
cat <<'SEL' | debconf-set-selections
keystone keystone/configure_db boolean false
keystone keystone/create-admin-tenant boolean false
keystone keystone/register-endpoint boolean false
nova-common nova/configure_db boolean false
nova-common nova/configure_ksat boolean false
nova-common nova/configure_rabbit boolean false
nova-api novaapi/configure_db boolean false
nova-api nova/configure_api-endpoint boolean false
glance-common glance/configure_db boolean false
glance-common glance/configure_ksat boolean false
glance-api glance/configure_api-endpoint boolean false
placement-common placement/configure_db boolean false
placement-common placement/configure_ksat boolean false
placement-api placement/configure_api-endpoint boolean false
neutron-common neutron/configure_db boolean false
neutron-common neutron/configure_ksat boolean false
neutron-common neutron/configure_rabbit boolean false
neutron-common neutron/configure_nova boolean false
neutron-api neutron/configure_api-endpoint boolean false
cinder-common cinder/configure_db boolean false
cinder-common cinder/configure_ksat boolean false
cinder-common cinder/configure_rabbit boolean false
cinder-api cinder/configure_api-endpoint boolean false
SEL
APT="apt-get -o DPkg::Lock::Timeout=900 -y -q"
t0=$(date +%s)
$APT update >/dev/null
$APT install --no-install-recommends $PKGS
echo "TIMING apt=$(( $(date +%s) - t0 ))s"
