"""``/api/v1/runs``: upload a run (streamed into the store, one job per stage queued), list runs, show one.

Uploads are stored, never parsed, here: the workers read them with the hardened readers.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from numdiff.service import crud, schemas
from numdiff.service.api.deps import ProjectDep, RunId, Service, ServiceDep, SessionDep, owned_run, refuse_nul_in
from numdiff.service.api.out import json_response, run_out
from numdiff.service.status import Status
from numdiff.service.upload import Form, parse_form
from numdiff.service.worker.wake import POLL_BACKSTOP_S, wake_all

__all__ = ["labels_from", "router"]

router = APIRouter(prefix="/api/v1/runs", tags=["runs"])

FILE_FIELDS = {"etrecord", "etdump", "debug_buffer", "step_inputs"}
_UPLOAD_SCHEMA = {"requestBody": {"content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["model", "etrecord", "etdump"],
    "properties": {"model": {"type": "string"},
                   "label": {"type": "array", "items": {"type": "string"}, "description": "KEY=VALUE, repeatable"},
                   "etrecord": {"type": "string", "format": "binary"},
                   "etdump": {"type": "string", "format": "binary"},
                   "debug_buffer": {"type": "string", "format": "binary"},
                   "step_inputs": {
                       "type": "string", "format": "binary",
                       "description": "the inputs the run used: a torch.save file of a list with each run's input "
                                      "tuple (read weights-only by the worker); the culprit stage judges the run on "
                                      "them"},
                   "inputs_are_representative": {
                       "type": "boolean", "default": False,
                       "description": "the run used the ETRecord's representative inputs (true/false): the culprit "
                                      "stage then judges every op that reads a graph input the runtime did not log "
                                      "on them (otherwise such ops are judged only when the run shows it used them)"}}}}}}}

#: How the form's ``inputs_are_representative`` field may say yes or no (an HTML checkbox sends "on").
_YES, _NO = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")


def labels_from(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as a mapping (422 for one that is not)."""
    labels: dict[str, str] = {}
    for item in items:
        key, sep, value = refuse_nul_in("a label", item).partition("=")
        if not sep or not key.strip() or len(key) > 100 or len(value) > 500:
            raise HTTPException(422, f"label {item[:120]!r} is not KEY=VALUE (key ≤ 100, value ≤ 500 characters)")
        labels[key.strip()] = value.strip()
    return labels


@contextmanager
def _full_store_is_507() -> Iterator[None]:
    """A full disk or quota while receiving: 507 (nothing was committed)."""
    try:
        yield
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise HTTPException(507, "the server's store is full (no space left or quota exceeded); "
                                     "nothing was kept: retry once space is freed") from None
        raise


def _declared(form: Form, field: str) -> bool:
    """A yes/no field of the form (absent: no; 422 for anything but the words of :data:`_YES` and :data:`_NO`)."""
    values = form.fields.get(field) or []
    if len(values) > 1:
        raise HTTPException(422, f"the field {field!r} is given {len(values)} times; give it once")
    value = refuse_nul_in(f"the field {field!r}", values[0] if values else "").strip().lower()
    if value not in _YES + _NO:
        raise HTTPException(422, f"the field {field!r} is {value[:40]!r}: say true or false")
    return value in _YES


def _run_fields(form: Form) -> tuple[str, dict[str, str]]:
    """The model name and labels of an upload (422 when the form lacks something)."""
    model_name = refuse_nul_in("the model name", (form.fields.get("model") or [""])[0].strip())
    if not model_name or len(model_name) > 200:
        raise HTTPException(422, "the form needs a model name (field 'model', at most 200 characters)")
    missing = [f for f in ("etrecord", "etdump") if f not in form.files]
    if missing:
        raise HTTPException(422, f"the form needs the file(s) {', '.join(missing)}")
    return model_name, labels_from(form.fields.get("label", []))


def _create_run(service: Service, project: int, model_name: str, labels: dict[str, str],
                files: dict[str, str], inputs_are_representative: bool) -> Response:
    """The run and its jobs in one transaction (a crash before the commit leaves no trace but orphan blobs)."""
    for _ in range(3):
        with service.sessions() as session:
            run = crud.create_run(session, project, model_name, labels, files,
                                  inputs_are_representative=inputs_are_representative)
            if run is None:  # the model was created by a concurrent upload: again, with theirs
                continue
            wake_all(service.settings.data)
            return json_response(run_out(session, run), status_code=201)
    raise HTTPException(503, "could not create the model row; retry")


@router.post("", response_model=schemas.RunOut, status_code=201, openapi_extra=_UPLOAD_SCHEMA)
async def upload_run(request: Request, project: ProjectDep, service: ServiceDep) -> Response:
    """Upload a run (streaming multipart; each file at most NUMDIFF_SERVICE_MAX_UPLOAD_MB, else 413)."""
    limit = service.settings.max_upload_bytes
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > 3 * limit + (1 << 20):
        raise HTTPException(413, f"the upload is larger than the limit of {limit} bytes per file")
    with _full_store_is_507():  # TooLarge and BadForm are answered by the app's handlers (413, 422)
        form = await parse_form(request.stream(), request.headers.get("content-type", ""), service.store,
                                FILE_FIELDS, limit)
    try:  # the whole form is checked before anything is committed: a rejected form leaves no blob
        model_name, labels = _run_fields(form)
        representative = _declared(form, "inputs_are_representative")
        if representative and "step_inputs" in form.files:
            raise HTTPException(422, "the form gives the run's own inputs (step_inputs) and says it used the "
                                     "ETRecord's representative ones (inputs_are_representative): give one of them")
        with _full_store_is_507():
            files = await run_in_threadpool(form.commit)
    except BaseException:
        form.abort()
        raise
    return await run_in_threadpool(_create_run, service, project, model_name, labels, files, representative)


@router.get("", response_model=schemas.RunList)
def list_runs(project: ProjectDep, session: SessionDep, model: str | None = None, status: str | None = None,
              label: Annotated[list[str] | None, Query(description="KEY=VALUE; repeatable (all must match)")] = None,
              limit: int = Query(100, ge=1, le=1000)) -> Response:
    runs = crud.list_runs(session, project, model=model, status=status, labels=labels_from(label or []), limit=limit)
    return json_response(schemas.RunList(runs=[run_out(session, run) for run in runs]))


@router.get("/{run_id}", response_model=schemas.RunOut)
async def show_run(run_id: RunId, project: ProjectDep, service: ServiceDep,
                   wait: float = Query(0.0, ge=0.0, le=30.0, description=(
                       "seconds to wait for the run to finish (done or failed) before answering: a long poll, "
                       "woken by the worker that finishes the run, so clients learn of the result at once "
                       "without polling"))) -> Response:
    def look() -> tuple[str, Response]:
        with service.sessions() as session:  # one short session per look: no connection held while waiting
            run = owned_run(session, project, run_id)
            return run.status, json_response(run_out(session, run))

    deadline = time.monotonic() + wait
    while True:
        ticket = service.bell.ticket() if wait > 0 else None  # before the look: a ring after it is not lost
        status, answer = await run_in_threadpool(look)
        left = deadline - time.monotonic()
        if ticket is None or status in (Status.DONE, Status.FAILED) or left <= 0:
            return answer
        await service.bell.wait(ticket, min(left, POLL_BACKSTOP_S))  # a worker's ring, or the backstop
