"""Pytest plugins: every shared fixture has one home here, registered once in tests/conftest.py.

world (people, projects, the local cloud, API and page clients), servers (a real Daphne, the worker
thread), browser (headless Chromium, logged-in pages, screenshots), kube (the kmock Kubernetes API server
and a connection to it), openstack (the development OpenStack and the VM stand-in). Builders of rows
(tasks, attempts, instances, snapshots) are plain functions in tests/builders.py.
"""
