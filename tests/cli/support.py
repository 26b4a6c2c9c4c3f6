"""What the CLI tests share besides fixtures: the installed command, a Cli runner, a line reader, spec files."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

BIN = Path(sys.executable).parent / "cloudpivot"


class Cli:
    """Runs `cloudpivot …` as a user would, with this test's config dir and the given environment."""

    def __init__(self, home: Path, env: dict[str, str], command: Path = BIN):
        self.home = home
        self.env = env
        self.command = command  # the development install, or one made by tests/cli/test_cli_install.py

    def environment(self, **extra: str) -> dict[str, str]:
        return self.env | extra

    def __call__(self, *args: str, input: str | None = None, timeout: float = 120, **extra: str):
        return subprocess.run(
            [str(self.command), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.environment(**extra),
        )

    def start(self, *args: str, **extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [str(self.command), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.environment(**extra),
            start_new_session=True,
        )

    def json(self, *args: str, **extra: str):
        done = self(*args, "-o", "json", **extra)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


class Lines:
    """A child's output pipe read line by line in a thread, so a test can wait for one line with a deadline
    and later take all the rest (nothing lost between the two, whatever the pipe's buffering)."""

    def __init__(self, stream):
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.queue.put(line)
        self.queue.put(None)

    def next(self, *, timeout: float = 60) -> str:
        try:
            line = self.queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line within {timeout} s") from None
        assert line is not None, "the output ended"
        return line

    def rest(self, *, timeout: float = 120) -> str:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the output did not end within {timeout} s"
        lines = []
        while (line := self.queue.get_nowait()) is not None:
            lines.append(line)
        return "".join(lines)


def spec_file(directory: Path, name: str, document: dict | str) -> Path:
    path = directory / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path
