"""numdiff.capture."""
