"""`cloudpivot task outputs ID [--download DIR]`: a task's declared outputs, fetched and checked (docs/cli.md)."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path, PurePosixPath

import httpx

from cloudpivot_cli import exitcodes, follow, output
from cloudpivot_cli.output import field
from cloudpivot_cli.parsing import add_command, add_output, connect

COLUMNS = [
    ("NAME", field("name")),
    ("STATE", field("state")),
    ("BYTES", field("bytes")),
    ("SHA256", lambda row: row.get("sha256") or row.get("reason") or ""),
]
CHUNK = 1024 * 1024


class Mismatch(Exception):
    """A download whose bytes are not what the manifest says."""


def outputs(args) -> int:
    manifest = connect(args).get(f"{follow.task_path(args.id)}/outputs", attempt=args.attempt)
    if args.download is None:
        if args.output in ("json", "yaml"):
            output.document(manifest, args.output)
        else:
            output.show(manifest["files"], args.output, COLUMNS)
            _note(manifest)
        return exitcodes.OK
    return download(manifest, Path(args.download))


def _note(manifest: dict) -> None:
    state = manifest.get("state")
    if state == "pending":
        print("the outputs are kept when the program ends", file=sys.stderr)
    elif state in ("incomplete", "none") and manifest.get("reason"):
        print(f"outputs {state}: {manifest['reason']}", file=sys.stderr)


def download(manifest: dict, directory: Path) -> int:
    """Fetch every stored output into `directory` and check its SHA-256; a mismatch is never left behind."""
    bad = 0
    for item in manifest["files"]:
        if item["state"] != "stored":
            print(f"missing: {item['name']}: {item['reason']}", file=sys.stderr)
            continue
        try:
            target = _target(directory, item["name"])
            _fetch(item, target)
        except (Mismatch, OSError, httpx.HTTPError, ValueError) as exc:
            print(f"cloudpivot: {item['name']}: {exc}", file=sys.stderr)
            bad += 1
            continue
        print(f"{item['sha256']}  {target}")
    _note(manifest)
    return exitcodes.OUTPUT_MISMATCH if bad else exitcodes.OK


def _target(directory: Path, name: str) -> Path:
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or any(part in ("..", ".") for part in parts):
        raise ValueError("not a relative name; not written")
    return directory.joinpath(*parts)


def _fetch(item: dict, target: Path) -> None:
    """The link is the permission: sent without the API token (an object store may serve it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.part-{os.getpid()}")
    digest, size = hashlib.sha256(), 0
    try:
        with httpx.stream("GET", item["url"], timeout=60, follow_redirects=False) as response:
            if response.status_code != 200:
                response.read()
                raise Mismatch(f"the link answered {response.status_code}: {_message(response)}")
            with tmp.open("wb") as handle:
                for chunk in response.iter_bytes(CHUNK):
                    digest.update(chunk)
                    handle.write(chunk)
                    size += len(chunk)
        if digest.hexdigest() != item["sha256"] or size != item["bytes"]:
            raise Mismatch(f"SHA-256 {digest.hexdigest()} ({size} bytes) is not the manifest's {item['sha256']}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _message(response: httpx.Response) -> str:
    try:
        return response.json().get("message") or response.text[:200]
    except ValueError:
        return response.text[:200]


def register(commands) -> None:
    p = add_command(
        commands,
        "outputs",
        "a task's declared outputs: names, sizes, SHA-256; --download fetches and checks them",
        outputs,
        "  cloudpivot task outputs ID\n"
        "  cloudpivot task outputs ID --download results/     # every SHA-256 checked\n"
        "  cloudpivot task outputs ID --attempt 1 -o json     # with fresh download links\n",
    )
    p.add_argument("id", metavar="ID")
    p.add_argument("--attempt", type=int, metavar="N", help="this attempt (default: the latest)")
    p.add_argument("--download", metavar="DIR", help="fetch every stored output into DIR and verify its SHA-256")
    add_output(p, default="table", choices=("table", "json", "yaml"))
