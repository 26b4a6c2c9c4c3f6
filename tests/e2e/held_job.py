"""A job for the real workers that holds on: it writes its worker's pid to `path`, then sleeps `seconds`."""

from __future__ import annotations

import os
import time
from pathlib import Path


def hold(path: str, seconds: float) -> None:
    Path(path).write_text(str(os.getpid()))
    time.sleep(seconds)
