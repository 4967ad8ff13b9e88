"""The service's own errors are in the NumdiffError tree; run and job states are one enum with the stored values."""

from __future__ import annotations

from numdiff.analysis.stages import STAGES
from numdiff.errors import InputError, NumdiffError
from numdiff.service.status import Status
from numdiff.service.store import TooLarge
from numdiff.service.upload import BadForm


def test_upload_errors_are_input_errors() -> None:
    for error in (BadForm, TooLarge):
        assert issubclass(error, InputError) and issubclass(error, NumdiffError)


def test_statuses_are_their_stored_strings() -> None:
    assert [s.value for s in Status] == ["queued", "running", "done", "failed"]
    assert Status.DONE == "done" and f"{Status.FAILED}" == "failed" and str(Status.QUEUED) == "queued"
    assert STAGES == ("profile", "gap", "culprits", "report")
