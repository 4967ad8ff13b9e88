"""The numdiff service's Python client, at its short path (:mod:`numdiff.service.client`)."""

from __future__ import annotations

from numdiff.service.client import AuthError, Client, ServiceError, ServiceInputError, UnreachableError

__all__ = ["AuthError", "Client", "ServiceError", "ServiceInputError", "UnreachableError"]
