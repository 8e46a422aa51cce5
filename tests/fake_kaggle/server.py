"""A fake Kaggle that speaks what kaggle 2.2.5 / kagglesdk 0.1.38 send, on 127.0.0.1.

What it does, like the real service (docs/KAGGLE.md says where each behaviour is from):
- POST JSON to /api/v1/<service>/<Method>. Auth: HTTP Basic username:key for a legacy key,
  `Authorization: Bearer TOKEN` for an API token; a wrong key, an unknown token, or a token
  sent as a key (Basic username:token) gets 401 (JSON {"code": 401, ...}).
- 403 for a dataset or kernel that does not exist or is not the caller's (status, output,
  log stream, delete): the real service never says 404 for those.
- Blob uploads: StartBlobUpload hands out a createUrl on this server; PUT stores the bytes.
- Datasets: CreateDataset makes a private dataset of the caller from uploaded blobs; it is
  processed for a while (`dataset_processing_polls` status answers of Kaggle's processing
  stages) before it is READY, and a kernel pushed with a dataset not READY yet gets it in
  invalidDatasetSources. Zip archives are unpacked into a folder of the same name when a
  kernel mounts the dataset. ListDatasets (the caller's own) and DeleteDataset.
- Kernels: SaveKernel queues the kernel; it starts after `kernel_queue_polls` status
  answers of QUEUED, and then RUNS the pushed script for real (a subprocess of this Python)
  under TERNIT_KAGGLE_ROOT=<its own folder> with input/<dataset-slug>/ laid out and
  working/ empty; its stdout+stderr is the log stream (SSE while running, a JSON blob after),
  working/ is the output list. Exit 0 is COMPLETE, anything else ERROR; outputs over
  `output_limit_bytes` when it ends are lost and the kernel is ERROR.
- Per-account GPU quota (GetAcceleratorQuotaStatistics); a running kernel's wall time is
  charged to its account, `charge` times over. At most `max_gpu_sessions` (2) kernels of
  one account queued or running: a push beyond is refused inside HTTP 200.

The waiting states are counted in the client's own requests, never in time: a test waits
for nothing but its own polls.

What tests can inject: `fail(method, status, retry_after=None, times=1, html=False)`
(429/5xx/412/403 on a method; `html`: the body a front end sends, a web page),
`refuse_push[user] = "text"` (an error inside HTTP 200), `down = True` (every connection is
dropped unanswered), `run_kernels = False` (kernels stay QUEUED), `kill_kernels_at = "text"`
(a kernel is killed when its log shows the text, as Kaggle ends a session that ran out of
host memory: no word from the trainer, status ERROR), `dry_at = {"user": "text"}` (when a
kernel of that account logs the text, the account's GPU quota is used up there and then,
and Kaggle ends the session: killed, status ERROR, `QUOTA_ENDED` as its failure message), `cut_stream_after = N` (a live log
stream is closed, without its last chunk, N events past what was logged when it opened, as
Kaggle's load balancer cuts streams), `hang_stream_once = N` (the first live stream to get N
events that far sends nothing more, the connection left open),
`vanish = {"ternit-data-"}` (datasets whose slug starts so are deleted at their first
status answer), `hang_once = {"Method"}` (its next call is read and never answered),
`delete_kernel(ref)`, `on_push = fn(kernel)` (called once a pushed kernel exists, before the
push is answered: a test can look at the account then, or kill the pushing process mid-push).
Every byte a client sends (bodies and blobs, not the auth header) is kept in `received`
so a test can scan it for secrets.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil


@dataclass
class Account:
    key: str | None
    total_s: float = 30 * 3600.0
    used_s: float = 0.0
    reserved_s: float = 0.0
    token: str | None = None


# Kaggle's processing stages of a new dataset version (kagglesdk DatabundleVersionStatus).
PROCESSING = ("BLOBS_RECEIVED", "BLOBS_DECOMPRESSED", "BLOBS_COPIED_TO_SDS", "INDIVIDUAL_BLOBS_COMPRESSED")
QUOTA_ENDED = "Your session ended: weekly GPU quota exhausted"  # Kaggle's words for a session the quota ended
HTML_ERROR = ("<!DOCTYPE html><html lang=en><meta charset=utf-8><title>Error {status}</title>"
              "<p><b>{status}.</b> <ins>That’s an error.</ins><p>Please try again later.</html>")


@dataclass
class Dataset:
    owner: str
    slug: str
    files: dict[str, bytes]
    title: str = ""
    processing_left: int = 0  # status answers before READY

    @property
    def ready(self) -> bool:
        return self.processing_left <= 0

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.files.values())


@dataclass
class Kernel:
    owner: str
    slug: str
    version: int
    request: dict[str, Any]
    root: Path
    status: str = "QUEUED"
    failure: str = ""
    log: list[dict[str, Any]] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    started: float = 0.0
    charged: float = 0.0
    dried: bool = False  # its account's quota ran out under it (dry_at)
    done: threading.Event = field(default_factory=threading.Event)
    queue_left: int = 0  # status answers of QUEUED before it starts
    outputs_lost: bool = False  # over the output limit: nothing was saved


def _delta(seconds: float) -> str:
    return f"{seconds:.3f}s"


class FakeKaggle:
    """Start with `with FakeKaggle(tmp_path) as fake:`; `fake.url` is the endpoint."""

    def __init__(self, workdir: Path, charge: float = 1.0) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.accounts: dict[str, Account] = {}
        self.datasets: dict[str, Dataset] = {}
        self.kernels: dict[str, Kernel] = {}
        self.blobs: dict[str, tuple[str, bytes]] = {}
        self.pushes: list[dict[str, Any]] = []  # every SaveKernel request body, in order
        self.calls: list[tuple[str, str]] = []  # (method, username) of every API call
        self.received: list[bytes] = []
        self.refuse_push: dict[str, str] = {}
        self.down = False
        self.run_kernels = True
        self.kill_kernels_at: str | None = None
        self.dry_at: dict[str, str] = {}
        self.on_push: Callable[[Kernel], None] | None = None
        self.charge = charge
        self.refresh_time = datetime.now(UTC) + timedelta(days=3)
        self.dataset_processing_polls = 2
        self.max_gpu_sessions = 2  # per account, queued or running
        self.kernel_queue_polls = 1
        self.output_limit_bytes: int | None = None
        self.cut_stream_after: int | None = None
        self.hang_stream_once: int | None = None
        self.vanish: set[str] = set()
        self.hang_once: set[str] = set()  # methods whose next call gets no answer at all
        self.streams_opened = 0  # live (SSE) log streams served
        self.streams_hung = 0
        self._unhang = threading.Event()
        self._failures: dict[str, list[tuple[int, str | None, bool]]] = {}
        self._lock = threading.RLock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- set-up ---------------------------------------------------------------------------
    def add_account(self, username: str, key: str | None = None, quota_h: float = 30.0, used_h: float = 0.0,
                    token: str | None = None) -> None:
        """An account with a legacy key, an API token, or both."""
        self.accounts[username] = Account(key, quota_h * 3600.0, used_h * 3600.0, token=token)

    def fail(self, method: str, status: int, retry_after: str | None = None, times: int = 1,
             html: bool = False) -> None:
        with self._lock:
            self._failures.setdefault(method, []).extend([(status, retry_after, html)] * times)

    def delete_kernel(self, ref: str) -> None:
        """The kernel is deleted on kaggle.com (by its owner): it stops and is gone."""
        with self._lock:
            k = self.kernels.pop(ref)
        if k.proc is not None and k.proc.poll() is None:
            _kill_tree(k.proc.pid)

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> FakeKaggle:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-kaggle", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._unhang.set()
        for k in list(self.kernels.values()):
            if k.proc is not None and k.proc.poll() is None:
                k.proc.kill()
                k.proc.wait()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeKaggle:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- queries for tests -------------------------------------------------------------------
    def remaining_s(self, username: str) -> float:
        a = self.accounts[username]
        return max(0.0, a.total_s - a.used_s - a.reserved_s)

    def wait_kernels(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        for k in list(self.kernels.values()):
            k.done.wait(max(0.0, deadline - time.monotonic()))

    def all_received(self) -> bytes:
        with self._lock:
            return b"".join(self.received)

    def count(self, method: str) -> int:
        return sum(1 for m, _ in self.calls if m == method)

    # -- the service ------------------------------------------------------------------------
    def _take_failure(self, method: str) -> tuple[int, str | None, bool] | None:
        with self._lock:
            queue = self._failures.get(method)
            return queue.pop(0) if queue else None

    def handle_api(self, method: str, user: str, body: dict[str, Any], base: str) -> tuple[int, Any]:
        account = self.accounts[user]
        if method == "GetAcceleratorQuotaStatistics":
            with self._lock:
                self._charge_running()
                return 200, {
                    "quotaRefreshTime": self.refresh_time.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z",
                    "gpuQuota": {"timeUsed": _delta(account.used_s), "timeReserved": _delta(account.reserved_s),
                                 "totalTimeAllowed": _delta(account.total_s)},
                }
        if method == "StartBlobUpload":
            token = f"blob-{len(self.blobs) + 1}-{os.urandom(4).hex()}"
            with self._lock:
                self.blobs[token] = (str(body.get("name", "")), b"")
            return 200, {"token": token, "createUrl": f"{base}/upload/{token}"}
        if method == "GetDatasetStatus":
            ref = f"{body.get('ownerSlug')}/{body.get('datasetSlug')}"
            with self._lock:
                ds = self.datasets.get(ref)
                if ds is not None and ds.owner == user and any(ds.slug.startswith(v) for v in self.vanish):
                    del self.datasets[ref]  # deleted on kaggle.com while the lab waited for it
                    ds = None
                if ds is None or ds.owner != user:  # absent or private: the same 403
                    return 403, {"code": 403, "message": "Permission 'datasets.get' was denied"}
                if not ds.ready:
                    ds.processing_left -= 1
                    return 200, {"status": PROCESSING[min(len(PROCESSING) - 1, max(0, 2 - ds.processing_left))]}
            return 200, {"status": "READY"}
        if method == "ListDatasets":
            return 200, self._list_datasets(user, body, base)
        if method == "DeleteDataset":
            ref = f"{body.get('ownerSlug')}/{body.get('datasetSlug')}"
            with self._lock:
                ds = self.datasets.get(ref)
                if ds is None or ds.owner != user:
                    return 403, {"code": 403, "message": "Permission 'datasets.delete' was denied"}
                del self.datasets[ref]
            return 200, {}
        if method == "CreateDataset":
            owner, slug = body.get("ownerSlug"), body.get("slug")
            if owner != user:
                return 403, {"code": 403, "message": "cannot create datasets for another user"}
            ref = f"{owner}/{slug}"
            if ref in self.datasets:
                return 200, {"status": "error", "error": f'The requested slug "{slug}" is already in use'}
            files = {}
            for f in body.get("files", []):
                name, data = self.blobs.pop(f["token"])
                files[name] = data
            with self._lock:
                self.datasets[ref] = Dataset(owner, str(slug), files, str(body.get("title", "")),
                                             self.dataset_processing_polls)
            return 200, {"ref": ref, "url": f"{base}/datasets/{ref}", "status": "ok"}
        if method == "SaveKernel":
            return self._save_kernel(user, body, base)
        if method == "GetKernelSessionStatus":
            k = self._kernel(user, body)
            if k is None:
                return 403, {"code": 403, "message": "Permission 'kernels.get' was denied"}
            with self._lock:
                if k.status == "QUEUED" and self.run_kernels:
                    if k.queue_left <= 0:
                        self._run(k)
                    k.queue_left -= 1
            out = {"status": k.status}
            if k.failure:
                out["failureMessage"] = k.failure
            return 200, out
        if method == "ListKernelSessionOutput":
            k = self._kernel(user, body)
            if k is None:
                return 403, {"code": 403, "message": "Permission 'kernels.get' was denied"}
            files = []
            working = k.root / "working"
            if k.status in ("COMPLETE", "ERROR") and not k.outputs_lost:
                for p in sorted(working.rglob("*")):
                    if p.is_file():
                        rel = p.relative_to(working).as_posix()
                        files.append({"url": f"{base}/out/{k.owner}/{k.slug}/{rel}", "fileName": rel})
            return 200, {"files": files, "log": json.dumps(k.log)}
        return 404, {"code": 404, "message": f"fake Kaggle does not know {method}"}

    def _list_datasets(self, user: str, body: dict[str, Any], base: str) -> dict[str, Any]:
        """The caller's own datasets (group MY), filtered by `search` in the slug or title."""
        if body.get("group") != "DATASET_SELECTION_GROUP_MY":
            return {"datasets": [], "nextPageToken": ""}
        search = str(body.get("search") or "").lower()
        with self._lock:
            mine = [d for d in self.datasets.values() if d.owner == user
                    and (search in d.slug.lower() or search in d.title.lower())]
        return {"datasets": [{"ref": f"{d.owner}/{d.slug}", "title": d.title, "totalBytes": d.size,
                              "url": f"{base}/datasets/{d.owner}/{d.slug}", "isPrivate": True,
                              "ownerRef": d.owner} for d in mine], "nextPageToken": ""}

    def _kernel(self, user: str, body: dict[str, Any]) -> Kernel | None:
        k = self.kernels.get(f"{body.get('userName')}/{body.get('kernelSlug')}")
        return k if k is not None and k.owner == user else None

    def _save_kernel(self, user: str, body: dict[str, Any], base: str) -> tuple[int, Any]:
        self.pushes.append(body)
        refusal = self.refuse_push.get(user)
        if refusal:
            return 200, {"ref": "", "url": "", "error": refusal}
        with self._lock:
            busy = [k for k in self.kernels.values() if k.owner == user and k.status in ("QUEUED", "RUNNING")]
        if len(busy) >= self.max_gpu_sessions:
            return 200, {"ref": "", "url": "", "error": f"Maximum batch GPU session count of {self.max_gpu_sessions} reached."}
        owner, _, slug = str(body.get("slug", "")).partition("/")
        if owner != user:
            return 403, {"code": 403, "message": "cannot push kernels for another user"}
        with self._lock:  # absent, another's, or still being processed: not attached
            invalid = [s for s in body.get("datasetDataSources", [])
                       if s not in self.datasets or self.datasets[s].owner != user or not self.datasets[s].ready]
        ref = f"{owner}/{slug}"
        with self._lock:
            version = self.kernels[ref].version + 1 if ref in self.kernels else 1
            root = self.workdir / "kernels" / f"{owner}--{slug}--v{version}"
            k = Kernel(owner, slug, version, body, root, queue_left=self.kernel_queue_polls)
            self.kernels[ref] = k
        self._lay_out(k, [s for s in body.get("datasetDataSources", []) if s not in invalid])
        with self._lock:
            if self.run_kernels and k.queue_left <= 0:
                self._run(k)
        if self.on_push is not None:
            self.on_push(k)
        out = {"ref": f"/code/{ref}", "url": f"{base}/code/{ref}", "versionNumber": version, "kernelId": len(self.pushes)}
        if invalid:
            out["invalidDatasetSources"] = invalid
        return 200, out

    def _lay_out(self, k: Kernel, sources: list[str]) -> None:
        (k.root / "working").mkdir(parents=True, exist_ok=True)
        for ref in sources:
            ds = self.datasets[ref]
            folder = k.root / "input" / ds.slug
            folder.mkdir(parents=True, exist_ok=True)
            for name, data in ds.files.items():
                if name.endswith(".zip"):  # Kaggle unpacks archives into the same hierarchy
                    with zipfile.ZipFile(io.BytesIO(data)) as z:
                        z.extractall(folder / name[:-4])
                else:
                    (folder / name).write_bytes(data)
            for p in folder.rglob("*"):  # inputs are read-only on Kaggle
                if p.is_file():
                    p.chmod(0o444)
        (k.root / "script.py").write_text(str(k.request.get("text", "")), encoding="utf-8")

    def _run(self, k: Kernel) -> None:
        env = {key: v for key, v in os.environ.items() if not key.startswith(("KAGGLE_", "TERNIT_"))}
        env.update({"TERNIT_KAGGLE_ROOT": str(k.root), "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1",
                    "KAGGLE_KERNEL_RUN_TYPE": "Batch"})
        k.proc = subprocess.Popen([sys.executable, str(k.root / "script.py")], cwd=k.root / "working", env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        k.started = time.monotonic()
        k.status = "RUNNING"
        threading.Thread(target=self._pump, args=(k,), daemon=True).start()

    def _pump(self, k: Kernel) -> None:
        assert k.proc is not None and k.proc.stdout is not None
        for raw in iter(k.proc.stdout.readline, b""):
            with self._lock:
                k.log.append({"stream_name": "stdout", "time": round(time.monotonic() - k.started, 3),
                              "data": raw.decode("utf-8", "replace")})
                if self.kill_kernels_at and self.kill_kernels_at in k.log[-1]["data"]:
                    _kill_tree(k.proc.pid, k.root)
                dry = self.dry_at.get(k.owner)
                if dry and dry in k.log[-1]["data"] and not k.dried:
                    k.dried = True
                    self._charge(k)
                    self.accounts[k.owner].used_s = self.accounts[k.owner].total_s
                    _kill_tree(k.proc.pid, k.root)
        rc = k.proc.wait()
        size = sum(p.stat().st_size for p in (k.root / "working").rglob("*") if p.is_file() and not p.is_symlink())
        with self._lock:
            self._charge(k)
            k.status = "COMPLETE" if rc == 0 else "ERROR"
            if rc != 0:
                k.failure = QUOTA_ENDED if k.dried else f"The kernel's script exited with code {rc}"
            if self.output_limit_bytes is not None and size > self.output_limit_bytes:
                k.status, k.outputs_lost = "ERROR", True
                k.failure = (f"Your notebook's output ({size:,} bytes) exceeds the limit of "
                             f"{self.output_limit_bytes:,} bytes; the output was not saved")
        k.done.set()

    def _charge(self, k: Kernel) -> None:
        spent = (time.monotonic() - k.started) * self.charge
        self.accounts[k.owner].used_s += spent - k.charged
        k.charged = spent

    def _charge_running(self) -> None:
        for k in self.kernels.values():
            if k.status == "RUNNING" and k.started:
                self._charge(k)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up on an answer (a timeout, a hung stream) resets its
        # connection: that is the point of those tests, not an error to print.
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server_fake: FakeKaggle
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def handle(self) -> None:
        if self.server_fake.down:  # the network is down: drop the connection unanswered
            self.close_connection = True
            return
        super().handle()

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None,
              content_type: str = "application/json") -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _user(self) -> str | None:
        """The caller: Basic username:key (a legacy key) or Bearer TOKEN (an API token). A
        token sent as a key is refused like a wrong key."""
        fake = self.server_fake
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            token = auth[7:].strip()
            return next((u for u, a in fake.accounts.items() if token and a.token == token), None)
        if not auth.startswith("Basic "):
            return None
        try:
            user, _, key = base64.b64decode(auth[6:]).decode().partition(":")
        except ValueError:
            return None
        acct = fake.accounts.get(user)
        return user if acct is not None and acct.key is not None and acct.key == key else None

    def _send_failure(self, failure: tuple[int, str | None, bool]) -> None:
        status, retry_after, html = failure
        headers = {"Retry-After": retry_after} if retry_after else None
        if html:  # a front end's answer: a web page, not the API's JSON
            return self._send(status, HTML_ERROR.format(status=status).encode(), headers,
                              content_type="text/html; charset=UTF-8")
        return self._send(status, {"code": status, "message": f"injected {status}"}, headers)

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n) if n else b""
        with self.server_fake._lock:
            self.server_fake.received.append(data)
        return data

    @property
    def base(self) -> str:
        return f"http://{self.headers.get('Host')}"

    def do_POST(self) -> None:
        fake = self.server_fake
        raw = self._body()
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) != 4 or parts[:2] != ["api", "v1"]:
            return self._send(404, {"code": 404, "message": "no such endpoint"})
        method = parts[3]
        user = self._user()
        fake.calls.append((method, user or ""))
        if user is None:
            return self._send(401, {"code": 401, "message": "Unauthenticated"})
        failure = fake._take_failure(method)
        if failure is not None:
            return self._send_failure(failure)
        with fake._lock:
            hang = method in fake.hang_once
            fake.hang_once.discard(method)
        if hang:  # read, never answered: the connection left open
            fake._unhang.wait(600)
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._send(400, {"code": 400, "message": "bad json"})
        status, payload = fake.handle_api(method, user, body, self.base)
        self._send(status, payload)

    def do_PUT(self) -> None:
        fake = self.server_fake
        data = self._body()
        token = self.path.rsplit("/", 1)[-1]
        with fake._lock:
            if not self.path.startswith("/upload/") or token not in fake.blobs:
                return self._send(404, {"code": 404, "message": "unknown upload"})
            name, _ = fake.blobs[token]
            fake.blobs[token] = (name, data)
        self._send(200, {"ok": True})

    def do_GET(self) -> None:
        fake = self.server_fake
        path = self.path.split("?")[0]
        if path.startswith("/out/"):
            _, _, owner, slug, rel = path.split("/", 4)
            k = fake.kernels.get(f"{owner}/{slug}")
            target = (k.root / "working" / rel) if k else None
            if target is None or not target.is_file():
                return self._send(404, {"code": 404, "message": "no such output"})
            data = target.read_bytes()
            return self._send(200, data, {"Last-Modified": formatdate(time.time(), usegmt=True)},
                              content_type="application/octet-stream")
        prefix = "/api/v1/kernels/logs/stream/"
        if not path.startswith(prefix):
            return self._send(404, {"code": 404, "message": "no such endpoint"})
        user = self._user()
        fake.calls.append(("LogsStream", user or ""))
        if user is None:
            return self._send(401, {"code": 401, "message": "Unauthenticated"})
        failure = fake._take_failure("LogsStream")
        if failure is not None:
            return self._send_failure(failure)
        owner, _, slug = path[len(prefix):].partition("/")
        k = fake.kernels.get(f"{owner}/{slug}")
        if k is None or k.owner != user:
            return self._send(403, {"code": 403, "message": "Permission 'kernels.get' was denied"})
        if k.done.is_set() or k.proc is None:
            return self._send(200, json.dumps(k.log).encode())
        self._stream(k)

    def _stream(self, k: Kernel) -> None:
        # Server-sent events in HTTP chunks (one per event, as a streaming server sends
        # them), replayed from the start like Kaggle's midtier does; cut `cut_stream_after`
        # events past the log's length at the start (the load balancer: no last chunk), or
        # hung — nothing more, the connection left open — at the `hang_stream_once`-th event
        # of the first stream that gets that far.
        fake = self.server_fake
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        with fake._lock:
            fake.streams_opened += 1
            # Cut after so many events past what the kernel had logged when it was opened:
            # the load balancer cuts by time, so every connection gets somewhat further.
            cut_at = None if fake.cut_stream_after is None else len(k.log) + fake.cut_stream_after
        sent = 0
        try:
            while True:
                if fake.down:
                    return  # the connection drops mid-stream
                with fake._lock:
                    new = k.log[sent:]
                    finished = k.done.is_set()
                for ev in new:
                    if self._hangs_at(sent):
                        fake._unhang.wait(600)
                        return
                    if cut_at is not None and sent >= cut_at:
                        return
                    self._chunk(b"data: " + json.dumps(ev).encode() + b"\n\n")
                    sent += 1
                if finished and sent >= len(k.log):
                    self._chunk(b"data: END_OF_LOG\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    return
                k.done.wait(0.05)
        except (BrokenPipeError, ConnectionResetError):
            return

    def _hangs_at(self, sent: int) -> bool:
        fake = self.server_fake
        with fake._lock:
            if fake.hang_stream_once is None or sent < fake.hang_stream_once:
                return False
            fake.hang_stream_once = None
            fake.streams_hung += 1
            return True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _kill_tree(pid: int, root: Path | None = None) -> None:
    """SIGKILL the kernel's script and what it started (torchrun, the trainer) — also a
    trainer forked just after its children were listed: whatever works inside the kernel's
    folder, as Kaggle ends the whole session."""
    try:
        parent = psutil.Process(pid)
        for p in [*parent.children(recursive=True), parent]:
            p.kill()
    except psutil.NoSuchProcess:
        pass
    if root is None:
        return
    for p in psutil.process_iter(["cwd"]):
        try:
            if (p.info.get("cwd") or "").startswith(str(root)):
                p.kill()
        except psutil.Error:
            continue
