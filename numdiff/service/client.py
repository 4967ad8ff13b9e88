"""Python client of the numdiff service (``numdiff serve``), on httpx.

Example:
    >>> from numdiff.client import Client  # doctest: +SKIP
    >>> client = Client("http://127.0.0.1:8000", token)  # or NUMDIFF_SERVER / NUMDIFF_TOKEN  # doctest: +SKIP
    >>> run = client.submit("mlp", etrecord="m.etrecord", etdump="run.etdp", debug_buffer="debug.bin",
    ...                     labels={"device": "pixel8"})  # doctest: +SKIP
    >>> result = client.wait(run["id"])  # status, gap rows, culprits  # doctest: +SKIP
    >>> client.fetch_report(run["id"], "report.html")  # doctest: +SKIP

Errors: :class:`AuthError` (exit status 5: no or bad token, or a run of another project, which
looks exactly like a run that does not exist), :class:`UnreachableError` (6: no answer from the
server), :class:`ServiceInputError` (3: the server refused the upload, 413 or 422, or the run's
analysis failed on its input), :class:`ServiceError` (4: anything else the server got wrong).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from numdiff._core.files import atomic_write
from numdiff.errors import InputError, NumdiffError, UsageError
from numdiff.service.status import Status

__all__ = ["AuthError", "Client", "ServiceError", "ServiceInputError", "UnreachableError"]


class AuthError(NumdiffError):
    """The server refused the token, or the object is not in the token's project (exit status 5)."""

    exit_code = 5


class UnreachableError(NumdiffError):
    """The server did not answer (exit status 6)."""

    exit_code = 6


class ServiceInputError(InputError):
    """The server refused the input, or the run's analysis failed on it (exit status 3)."""

    exit_code = 3


class ServiceError(NumdiffError):
    """The server failed (5xx) or answered something unexpected (exit status 4)."""

    exit_code = 4


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    detail = body.get("detail", body) if isinstance(body, dict) else body
    return str(detail)[:600]


class Client:
    """One numdiff server and token (``server``/``token`` default to ``NUMDIFF_SERVER``/``NUMDIFF_TOKEN``)."""

    def __init__(self, server: str | None = None, token: str | None = None, *, timeout: float = 120.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        server = server or os.environ.get("NUMDIFF_SERVER")
        token = token or os.environ.get("NUMDIFF_TOKEN")
        if not server:
            raise UsageError("no server given\nPass --server URL or set NUMDIFF_SERVER (e.g. http://127.0.0.1:8000).")
        if not token:
            raise UsageError("no token given\nPass --token TOKEN or set NUMDIFF_TOKEN "
                             "(create one with `numdiff admin create-token`).")
        self.server = server.rstrip("/")
        self._timeout = timeout
        self._http = httpx.Client(base_url=self.server, headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx.Timeout(timeout, connect=10.0), transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ------------------------------------------------------------------------------

    def _request(self, method: str, url: str, what: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, url, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError,
                httpx.WriteError, httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout) as e:
            raise UnreachableError(f"{what}: the numdiff server at {self.server} did not answer ({type(e).__name__}: "
                                   f"{e})\nCheck the URL and that `numdiff serve` is running there.") from None
        code = response.status_code
        if code == 401:
            raise AuthError(f"{what}: the server refused the token ({_detail(response)})\n"
                            "Check --token / NUMDIFF_TOKEN, or create a token with `numdiff admin create-token`.")
        if code in (403, 404):
            raise AuthError(f"{what}: not found in this token's project ({_detail(response)})\n"
                            "Check the run id and that the token belongs to the run's project.")
        if code in (413, 422):
            raise ServiceInputError(f"{what}: the server refused the input (HTTP {code}: {_detail(response)})")
        if code == 409:
            raise ServiceInputError(f"{what}: {_detail(response)}")
        if code == 507:
            raise ServiceError(f"{what}: the server's store is full (HTTP 507: {_detail(response)})\n"
                               "Nothing of this upload was kept. Ask the server's operator to free space or raise "
                               "NUMDIFF_SERVICE_STORE_QUOTA_MB, then submit again.")
        if code >= 400:
            raise ServiceError(f"{what}: the server answered HTTP {code}: {_detail(response)}\n"
                               "See the server's log; retry later if it is overloaded.")
        return response

    def _json(self, method: str, url: str, what: str, **kwargs: Any) -> dict[str, Any]:
        """The server's answer, a JSON object (every endpoint of the API answers one)."""
        response = self._request(method, url, what, **kwargs)
        try:
            body = response.json()
        except ValueError:
            raise ServiceError(f"{what}: the server's answer is not JSON: {response.text[:200]!r}") from None
        if not isinstance(body, dict):
            raise ServiceError(f"{what}: the server's answer is not a JSON object: {response.text[:200]!r}")
        return body

    # --- API -----------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return self._json("GET", "/healthz", "health check")

    def submit(self, model: str, etrecord: str | os.PathLike[str], etdump: str | os.PathLike[str],
               debug_buffer: str | os.PathLike[str] | None = None,
               labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Upload a run (streamed from the files); returns the run (``id``, ``status`` ...)."""
        roles = {"etrecord": etrecord, "etdump": etdump, "debug_buffer": debug_buffer}
        with ExitStack() as stack:
            files = {}
            for role, path in roles.items():
                if path is None:
                    continue
                try:
                    f = stack.enter_context(open(path, "rb"))
                except OSError as e:
                    raise InputError(f"cannot read the {role} {os.fspath(path)!r}: {e.strerror}\n"
                                     "Check the path and permissions.") from None
                files[role] = (Path(path).name, f, "application/octet-stream")
            data = {"model": model, "label": [f"{k}={v}" for k, v in (labels or {}).items()]}
            return self._json("POST", "/api/v1/runs", "upload", data=data, files=files)

    def run(self, run_id: int) -> dict[str, Any]:
        return self._json("GET", f"/api/v1/runs/{int(run_id)}", f"run {run_id}")

    def result(self, run_id: int) -> dict[str, Any]:
        """The run with ``gap`` (SNR rows) and ``culprits`` once analysed."""
        return self._json("GET", f"/api/v1/runs/{int(run_id)}/result", f"run {run_id}")

    def wait(self, run_id: int, timeout: float | None = None, poll: float = 0.5) -> dict[str, Any]:
        """Wait until the run is done or failed (or ``timeout`` passes), then return :meth:`result`.

        Each request is a long poll (the server answers as soon as the run finishes, or after up to
        20 s); ``poll`` is the pause between requests to a server without long polls.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 20.0 if deadline is None else max(0.0, min(20.0, deadline - time.monotonic()))
            started = time.monotonic()
            run = self._json("GET", f"/api/v1/runs/{int(run_id)}", f"run {run_id}", params={"wait": round(left, 3)},
                             timeout=httpx.Timeout(left + self._timeout, connect=10.0))
            if run.get("status") in (Status.DONE, Status.FAILED):
                return self.result(run_id)
            if deadline is not None and time.monotonic() > deadline:
                return self.result(run_id)
            if time.monotonic() - started < left / 2:  # answered early without a result: an older server
                time.sleep(poll)
                poll = min(poll * 1.3, 3.0)

    def runs(self, model: str | None = None, status: str | None = None,
             labels: Mapping[str, str] | None = None, limit: int = 100) -> list[dict[str, Any]]:
        params: list[tuple[str, str | int]] = [("limit", limit)]
        params += [("model", model)] if model else []
        params += [("status", status)] if status else []
        params += [("label", f"{k}={v}") for k, v in (labels or {}).items()]
        out: list[dict[str, Any]] = self._json("GET", "/api/v1/runs", "list runs", params=params)["runs"]
        return out

    def stage(self, run_id: int, kind: str) -> dict[str, Any]:
        """One stage's result once its job is done: ``profile``, ``gap``, ``culprits`` or ``report``.

        The profile is there as soon as its stage finishes, before the gap is computed
        (``numdiff.analysis.stages`` has the models that read each).
        """
        return self._json("GET", f"/api/v1/runs/{int(run_id)}/jobs/{kind}", f"{kind} of run {run_id}")

    def analysis(self, run_id: int) -> dict[str, Any]:
        """The saved analysis document (``numdiff.report.Analysis.model_validate`` reads it)."""
        return self._json("GET", f"/api/v1/runs/{int(run_id)}/analysis.json", f"run {run_id}")

    def fetch_report(self, run_id: int, path: str | os.PathLike[str]) -> Path:
        """Write the run's HTML report to ``path`` (through a temporary file, replaced at the end)."""
        response = self._request("GET", f"/api/v1/runs/{int(run_id)}/report.html", f"report of run {run_id}")
        return atomic_write(path, response.content)

    def compare(self, new_run: int, base_run: int | None = None, **thresholds: float) -> dict[str, Any]:
        """The CI gate: ``passed``, ``regressions`` and the diff of ``new_run`` against ``base_run`` or the baseline."""
        body: dict[str, Any] = {"new_run": int(new_run), **thresholds}
        if base_run is not None:
            body["base_run"] = int(base_run)
        return self._json("POST", "/api/v1/compare", "compare", json=body)

    def set_baseline(self, model: str, run_id: int) -> dict[str, Any]:
        return self._json("PUT", f"/api/v1/models/{model}/baseline", "set baseline",
                                         json={"run_id": int(run_id)})
