"""numdiff.present."""
