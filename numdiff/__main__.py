"""``python -m numdiff`` runs the command line."""

from numdiff.cli import main

raise SystemExit(main())
