"""The one list of django-q2 schedules; `python manage.py sync_schedules` makes the database match it."""

SCHEDULES = [
    # Every minute a ticker job runs reconcile passes for about a minute (tasks.jobs.tick);
    # a lease keeps it to one at a time across all workers.
    {"name": "ticker", "func": "tasks.jobs.tick", "schedule_type": "I", "minutes": 1},
    # Metrics (docs/metrics.md): a sampling pass every minute; averages and retention every 15 minutes.
    {"name": "metrics-sample", "func": "clusters.jobs.sample_metrics", "schedule_type": "I", "minutes": 1},
    {"name": "metrics-downsample", "func": "clusters.jobs.downsample_metrics", "schedule_type": "I", "minutes": 15},
    # Connection health (clusters/health.py): each cloud's checks, the verdict the pages, API and admin show.
    {"name": "clouds-health", "func": "clusters.jobs.check_health", "schedule_type": "I", "minutes": 5},
    # Observe every instance's server (one list per connection), prune snapshots past retention.
    {"name": "instances-refresh", "func": "resources.jobs.refresh", "schedule_type": "I", "minutes": 1},
    # Compare what CloudPivot tagged in each cloud with the database; the admin's orphan report.
    {"name": "orphans-scan", "func": "orphans.jobs.scan", "schedule_type": "I", "minutes": 10},
    # The event feed and webhooks (notifications/): a pump that sequences the feed and posts due deliveries for
    # about 50 s of every minute; the feed's own retention daily (EVENT_FEED_RETENTION_DAYS).
    {"name": "notifications-pump", "func": "notifications.jobs.pump", "schedule_type": "I", "minutes": 1},
    {"name": "notifications-prune", "func": "notifications.jobs.prune", "schedule_type": "D"},
    # Monthly budgets (usage/budgets.py): the 80 % and 100 % feed entries, the hard stop's hold set or cleared.
    {"name": "budgets-sweep", "func": "usage.jobs.sweep", "schedule_type": "I", "minutes": 1},
    # Retention (cloudpivot/retention.py): finished tasks, audit entries, operations archived, then deleted.
    {"name": "retention", "func": "cloudpivot.retention.prune", "schedule_type": "D"},
]
