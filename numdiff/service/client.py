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

from numdiff._core.files import atomic_path
from numdiff._core.terminal import printable
from numdiff.errors import InputError, NumdiffError, UsageError
from numdiff.service.status import Status

__all__ = ["MAX_REPORT_BYTES", "AuthError", "Client", "ServiceError", "ServiceInputError", "UnreachableError"]


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
    """The server's error text, cut short and with its control characters shown as escapes (it is printed).

    Its lines are joined with `` | `` as the command line joins a local error's, so the what and the
    what-to-do of a numdiff error read the same from the server (never a literal backslash-n).
    """
    try:
        body = response.json()
    except ValueError:
        return _lines(response.text[:300])
    detail = body.get("detail", body) if isinstance(body, dict) else body
    return _lines(str(detail)[:600])


def _lines(text: str) -> str:
    """Lines split at newlines only: a carriage return or other control character stays visible as an escape."""
    return " | ".join(printable(line, newlines=False) for line in text.split("\n") if line.strip())


#: Failures of the connection itself (including a body cut short by the server): exit status 6.
_TRANSPORT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError,
                     httpx.WriteError, httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)
#: How much of an error answer is read to quote it (the rest is never downloaded).
_ERROR_BODY_BYTES = 64 << 10
#: ``fetch_report``'s default cap on a report's size (``numdiff fetch-report --max-bytes``).
MAX_REPORT_BYTES = 256 << 20


def _raise_for_status(response: httpx.Response, what: str) -> None:
    """Raise the client's error for an answer that is not a success (a redirect included: none is expected)."""
    code = response.status_code
    if 300 <= code < 400:
        where = printable(response.headers.get("location", "(no Location)"), newlines=False)[:200]
        raise ServiceError(f"{what}: the server answered a redirect (HTTP {code} to {where})\n"
                           "The numdiff API never redirects: check --server / NUMDIFF_SERVER (scheme, host, port).")
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


def _first_bytes(response: httpx.Response, limit: int) -> bytes:
    """Up to ``limit`` bytes of a streamed answer's body (the rest is never downloaded)."""
    out = bytearray()
    for chunk in response.iter_bytes():
        out += chunk[: limit - len(out)]
        if len(out) >= limit:
            break
    return bytes(out)


def _quoting_headers(headers: httpx.Headers) -> dict[str, str]:
    """The headers needed to quote an answer's body again (its type and where a redirect points)."""
    return {k: headers[k] for k in ("content-type", "location") if k in headers}


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

    def _unreachable(self, what: str, e: Exception) -> UnreachableError:
        return UnreachableError(f"{what}: the numdiff server at {self.server} did not answer ({type(e).__name__}: "
                                f"{printable(e, newlines=False)})\nCheck the URL and that `numdiff serve` is running "
                                "there.")

    def _request(self, method: str, url: str, what: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, url, **kwargs)
        except _TRANSPORT_ERRORS as e:
            raise self._unreachable(what, e) from None
        _raise_for_status(response, what)
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
               labels: Mapping[str, str] | None = None, *, step_inputs: str | os.PathLike[str] | None = None,
               inputs_are_representative: bool = False) -> dict[str, Any]:
        """Upload a run (streamed from the files); returns the run (``id``, ``status`` ...).

        Which graph inputs the run used, when the runtime did not log them: ``step_inputs``, a
        ``torch.save`` file of a list with each run's input tuple (the culprit stage judges the run
        on them, as ``find_culprits(step_inputs=...)``), or ``inputs_are_representative=True``
        when it used the ETRecord's representative inputs. Without either, ops that read such an
        input are judged only when the run shows it used the representative ones.
        """
        roles = {"etrecord": etrecord, "etdump": etdump, "debug_buffer": debug_buffer, "step_inputs": step_inputs}
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
            data: dict[str, Any] = {"model": model, "label": [f"{k}={v}" for k, v in (labels or {}).items()]}
            if inputs_are_representative:
                data["inputs_are_representative"] = "true"
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

    def fetch_report(self, run_id: int, path: str | os.PathLike[str], *,
                     max_bytes: int = MAX_REPORT_BYTES) -> Path:
        """Write the run's HTML report to ``path``, at most ``max_bytes`` bytes of it.

        The report is streamed into a private temporary file beside ``path`` (a fresh name, never
        followed through a symlink) that replaces ``path`` only once the whole body has arrived: a
        redirect, a body over ``max_bytes``, shorter than its ``Content-Length`` or empty raises and
        leaves ``path`` as it was.

        Raises:
            ServiceError: A redirect, an oversized, short or empty body (exit status 4), or what
                any request raises (:class:`AuthError`, :class:`UnreachableError` ...).
        """
        what = f"report of run {run_id}"
        url = f"/api/v1/runs/{int(run_id)}/report.html"
        try:
            with self._http.stream("GET", url) as response:
                if response.status_code >= 300:
                    head = _first_bytes(response, _ERROR_BODY_BYTES)
                    _raise_for_status(httpx.Response(response.status_code, content=head,
                                                     headers=_quoting_headers(response.headers)), what)
                return self._save(response, path, max_bytes, what)
        except _TRANSPORT_ERRORS as e:
            raise self._unreachable(what, e) from None

    @staticmethod
    def _save(response: httpx.Response, path: str | os.PathLike[str], max_bytes: int, what: str) -> Path:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise ServiceError(f"{what}: the server announces {int(declared)} bytes, over the {max_bytes}-byte cap\n"
                               "Nothing was written. Raise the cap (--max-bytes) if the report is really that big.")
        size = 0
        with atomic_path(path) as tmp:
            fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "wb") as f:
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise ServiceError(f"{what}: the report is over the {max_bytes}-byte cap\nNothing was "
                                           "written. Raise the cap (--max-bytes) if the report is really that big.")
                    f.write(chunk)
            received = response.num_bytes_downloaded if "content-encoding" in response.headers else size
            if declared.isdigit() and received < int(declared):
                raise ServiceError(f"{what}: the server sent {received} of the {int(declared)} bytes it announced\n"
                                   "Nothing was written. Fetch the report again.")
            if size == 0:
                raise ServiceError(f"{what}: the server sent an empty report\nNothing was written. "
                                   "See the server's log for the run's report stage.")
        return Path(os.fspath(path))

    def compare(self, new_run: int, base_run: int | None = None, **thresholds: float) -> dict[str, Any]:
        """The CI gate: ``passed``, ``regressions`` and the diff of ``new_run`` against ``base_run`` or the baseline."""
        body: dict[str, Any] = {"new_run": int(new_run), **thresholds}
        if base_run is not None:
            body["base_run"] = int(base_run)
        return self._json("POST", "/api/v1/compare", "compare", json=body)

    def set_baseline(self, model: str, run_id: int) -> dict[str, Any]:
        return self._json("PUT", f"/api/v1/models/{model}/baseline", "set baseline",
                                         json={"run_id": int(run_id)})
