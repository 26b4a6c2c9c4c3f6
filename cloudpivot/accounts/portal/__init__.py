"""The accounts side of the portal: personal settings and project pages (interfaces over accounts' services)."""
