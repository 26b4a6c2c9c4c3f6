#!/bin/sh
# The image's entrypoint: one role per container (docs/deploy.md, "Kubernetes").
#   web              the ASGI web server (pages, REST API, Runner API, websockets) on $PORT (8000)
#   worker           the background workers (django-q2 qcluster)
#   migrate          apply migrations and the schedules, once per release (the migrate Job)
#   wait-migrations  wait until every migration is applied (an init container of web and worker)
#   serve            web + workers + host agent in one container (`manage.py serve`, the one-host layout)
#   manage ARGS...   any other management command (check_cloud, apitoken, host_agent, ...)
set -eu
cd "$(dirname "$0")/../.."

role="${1:-web}"
[ "$#" -gt 0 ] && shift
case "$role" in
  web)
    # One process per pod by default: scale with replicas. Behind the Ingress controller, whose
    # X-Forwarded-For/-Proto are believed from FORWARDED_ALLOW_IPS (the NetworkPolicy lets nobody else in).
    exec python -m uvicorn cloudpivot.asgi:application \
      --host "${HOST:-0.0.0.0}" --port "${PORT:-8000}" --workers "${CLOUDPIVOT_WEB_PROCESSES:-1}" \
      --loop uvloop --http httptools --ws websockets-sansio --lifespan off \
      --proxy-headers --forwarded-allow-ips "${FORWARDED_ALLOW_IPS:-127.0.0.1}" \
      --timeout-graceful-shutdown 20 "$@"
    ;;
  worker)
    exec python manage.py qcluster "$@"
    ;;
  migrate)
    python manage.py migrate --noinput "$@"
    exec python manage.py sync_schedules
    ;;
  wait-migrations)
    until python manage.py migrate --check >/dev/null 2>&1; do
      echo "waiting for the migrations of this release (the migrate Job) ..."
      sleep 5
    done
    ;;
  serve)
    exec python manage.py serve --host "${HOST:-0.0.0.0}" "$@"
    ;;
  manage)
    exec python manage.py "$@"
    ;;
  *)
    echo "unknown role '$role': web, worker, migrate, wait-migrations, serve or manage" >&2
    exit 64
    ;;
esac
