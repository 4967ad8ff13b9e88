"""numdiff.comparators."""
