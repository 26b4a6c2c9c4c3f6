"""The host program as one file a VM's user data can carry: a zipapp of the modules in runner_api/agent/.

Built in memory from this very tree, byte for byte the same for the same sources (fixed member times), so the
program in a VM is always the server's own version and its SHA-256 says which one it is. About 24 KB (33 KB in
base64): well inside Nova's 64 KB of user data.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import zipfile
from pathlib import Path

AGENT_DIR = Path(__file__).resolve().parents[2] / "runner_api" / "agent"
MODULES = (
    "cloudpivot_agent",
    "cloudpivot_agent_log",
    "cloudpivot_boot",
    "cloudpivot_common",
    "cloudpivot_outputs",
    "cloudpivot_stage",
    "cloudpivot_supervisor",
    "cloudpivot_sync",
    "cloudpivot_upload",
)
MAIN = "import sys\n\nimport cloudpivot_agent\n\nsys.exit(cloudpivot_agent.main())\n"
SHEBANG = b"#!/usr/bin/env python3\n"


@functools.cache
def agent_zipapp() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        members = [(f"{name}.py", (AGENT_DIR / f"{name}.py").read_text()) for name in MODULES]
        for name, source in [*members, ("__main__.py", MAIN)]:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type, info.external_attr = zipfile.ZIP_STORED, 0o644 << 16
            archive.writestr(info, source)
    return SHEBANG + buffer.getvalue()


@functools.cache
def agent_zipapp_gzip() -> bytes:
    """The zipapp gzipped whole, as the user data carries it (cloud-init's `gz+b64`): its members are stored,
    not deflated one by one, so one gzip stream compresses across modules (a fifth smaller than a deflated zip)."""
    return gzip.compress(agent_zipapp(), compresslevel=9, mtime=0)


def agent_zipapp_sha256() -> str:
    return hashlib.sha256(agent_zipapp()).hexdigest()
