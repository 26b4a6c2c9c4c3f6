"""Persistent VM instances, snapshots and metrics arrive with the resources issue."""
