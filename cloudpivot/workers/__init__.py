"""The background workers' process (`manage.py qcluster`): django-q2's, with a stop that always ends (stop.py)."""
