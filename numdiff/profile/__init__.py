"""numdiff.profile."""
