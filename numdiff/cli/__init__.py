"""numdiff.cli."""
