"""The store's per-process temporary directory under concurrent uploads.

An upload that finishes removes the directory when it is empty while another request thread is
making its temporary file there: the two must not interleave (found by the load test under a busy
machine: FileExistsError from the directory's mkdir, an HTTP 500 for one upload).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from numdiff.service.store import Store


def test_temporaries_and_tidying_in_many_threads_never_collide(tmp_path: Path) -> None:
    store = Store(tmp_path / "data")
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(300):
                fd, path = store.temp_file("upload-")
                os.close(fd)
                os.unlink(path)
                store.tidy_tmp()
                store.temp_dir("job1-").rmdir()
                store.tidy_tmp()
        except BaseException as e:  # noqa: BLE001 - any error is the finding
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors[:3]
    assert not list((tmp_path / "data" / "tmp").iterdir())  # the last tidy left no folder behind
