"""Swift as the store of a connection's task outputs, through temporary URLs (docs/data.md).

CloudPivot holds the project's credentials; an execution never does. It gets one prefix-scoped temporary URL
per attempt (`PUT` under `cp/<attempt>/` only, until it expires) and writes its files straight to Swift; a
person gets a temporary `GET` URL per file, so the bytes never pass through CloudPivot.

The key that signs them is the results container's own (`X-Container-Meta-Temp-URL-Key`), made at the first
use with the container, read back once per process and connection. Signatures are HMAC-SHA256 (Swift's
`tempurl` accepts SHA-1 too, which openstacksdk's `generate_temp_url` still uses: ours does not).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import secrets
import threading
import time
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from clusters.backends.base import BackendError
from clusters.backends.openstack.client import OpenStackClient

MAX_STAGED = 10_000  # objects one `object` reference may stage in
PROJECT_MARK = "cloudpivot-project"  # a container's metadata naming the CloudPivot project it belongs to
_keys: dict[tuple, str] = {}  # (connection id, container) → the container's temp URL key
_keys_lock = threading.Lock()


class SwiftStore:
    """The results container of one OpenStack connection (the option `results_container`)."""

    kind = "swift"

    def __init__(self, client: OpenStackClient) -> None:
        self.client = client
        self.container = str(client.options["results_container"])

    # ------------------------------------------------------------------ what executions and people get
    def upload_target(self, prefix: str, seconds: int) -> dict[str, Any]:
        """Where an execution PUTs its files: `url + name + "?" + query`, for `seconds` (docs/data.md)."""
        base = self.object_url(prefix)
        expires = int(time.time()) + int(seconds)
        signature = self._sign("PUT", expires, "prefix:" + urlsplit(base).path)
        query = urlencode({"temp_url_sig": signature, "temp_url_expires": expires, "temp_url_prefix": prefix})
        return {"kind": self.kind, "url": base, "query": query, "expires": expires}

    def download_url(self, name: str, seconds: int, *, filename: str = "") -> str:
        """A temporary GET URL of one object: Swift serves the bytes (`filename`: the attachment's name)."""
        url = self.object_url(name)
        expires = int(time.time()) + int(seconds)
        query = {"temp_url_sig": self._sign("GET", expires, urlsplit(url).path), "temp_url_expires": expires}
        if filename:
            query["filename"] = filename
        return f"{url}?{urlencode(query)}"

    def delete_prefix(self, prefix: str) -> int:
        """Remove every object under `prefix` (retention); returns how many went."""
        conn = self.client.conn()
        names = [
            item.name
            for item in self.client.call(
                "listing stored outputs", lambda: list(conn.object_store.objects(self.container, prefix=prefix))
            )
        ]
        for name in names:
            self.client.call(
                "removing a stored output", conn.object_store.delete_object, name, container=self.container
            )
        return len(names)

    def object_url(self, name: str, container: str = "") -> str:
        endpoint = self._endpoint()
        return f"{endpoint}/{quote(container or self.container)}/{quote(name)}"

    # ------------------------------------------------------------------ data staged in (`object` references)
    def container_owner(self, container: str) -> str | None:
        """The project a container is marked for (`X-Container-Meta-Cloudpivot-Project`), "" when it carries no
        mark, None when there is no such container."""
        conn = self.client.conn()
        try:
            found = self.client.call("reading a container", conn.object_store.get_container_metadata, container)
        except BackendError as exc:
            if exc.kind == "not_found":
                return None
            raise
        return str((found.metadata or {}).get(PROJECT_MARK) or "")

    def stage_in(self, ref: str, path: str, seconds: int) -> dict[str, Any]:
        """What a host program fetches for one `object` reference ("container/prefix"): every object under the
        prefix (listed now, with the project's credentials), through one prefix-scoped temporary GET URL signed
        with the account's key. A container gone since submission: BackendError not_found."""
        container, _, prefix = ref.partition("/")
        conn = self.client.conn()
        objects = self.client.call(
            "listing the data to stage in",
            lambda: list(itertools.islice(conn.object_store.objects(container, prefix=prefix), MAX_STAGED + 1)),
        )
        if len(objects) > MAX_STAGED:
            raise BackendError(
                f"more than {MAX_STAGED} objects under {ref!r}: name a narrower prefix", kind="invalid_spec"
            )
        base = self.object_url(prefix, container)
        expires = int(time.time()) + int(seconds)
        signature = self._sign("GET", expires, "prefix:" + urlsplit(base).path, key=self._account_key())
        query = urlencode({"temp_url_sig": signature, "temp_url_expires": expires, "temp_url_prefix": prefix})
        files = [
            {"name": item.name, "relative": item.name[len(prefix) :].lstrip("/"), "bytes": item.content_length}
            for item in objects
            if not item.name.endswith("/")  # pseudo-directory markers hold no data
        ]
        return {"path": path, "url": base, "prefix": prefix, "query": query, "files": files}

    def _account_key(self) -> str:
        """The account's temp URL key (objects outside the results container are signed with it), set once
        if the account has none."""
        cache_key = (self.client.connection.pk, self.client.connection.credentials_ref, "")
        with _keys_lock:
            if cache_key in _keys:
                return _keys[cache_key]
        store = self.client.conn().object_store
        metadata = self.client.call("reading the object store's account", store.get_account_metadata)
        key = metadata.meta_temp_url_key_2 or metadata.meta_temp_url_key
        if not key:
            key = secrets.token_urlsafe(32)
            self.client.call("setting the account's temporary URL key", store.set_account_temp_url_key, key)
        key = key.decode() if isinstance(key, bytes) else str(key)
        with _keys_lock:
            _keys[cache_key] = key
        return key

    # ------------------------------------------------------------------ the container and its key
    def _endpoint(self) -> str:
        conn = self.client.conn()
        endpoint = self.client.call("finding the object store", conn.object_store.get_endpoint)
        if not endpoint:
            raise BackendError("this cloud has no object store (Swift) in its catalog", kind="invalid_spec")
        return endpoint.rstrip("/")

    def _sign(self, method: str, expires: int, path: str, *, key: str = "") -> str:
        key = key or self._key()
        return hmac.new(key.encode(), f"{method}\n{expires}\n{path}".encode(), hashlib.sha256).hexdigest()

    def _key(self) -> str:
        """The container's temp URL key, making the container and the key at the first use."""
        cache_key = (self.client.connection.pk, self.client.connection.credentials_ref, self.container)
        with _keys_lock:
            if cache_key in _keys:
                return _keys[cache_key]
        conn = self.client.conn()
        store = conn.object_store
        try:
            metadata = self.client.call("reading the results container", store.get_container_metadata, self.container)
            key = metadata.meta_temp_url_key_2 or metadata.meta_temp_url_key
        except BackendError as exc:
            if exc.kind != "not_found":
                raise
            self.client.call("making the results container", store.create_container, name=self.container)
            key = None
        if not key:
            key = secrets.token_urlsafe(32)
            self.client.call(
                "setting the results container's key", store.set_container_temp_url_key, self.container, key
            )
        key = key.decode() if isinstance(key, bytes) else str(key)
        with _keys_lock:
            _keys[cache_key] = key
        return key
