"""numdiff.schema."""
