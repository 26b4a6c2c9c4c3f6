"""The cloudpivot command: a client of CloudPivot's REST API (no Django, only httpx and PyYAML)."""

__version__ = "0.1.0"
