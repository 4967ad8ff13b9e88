"""Advice that several tools give in the same words.

A run's graph inputs are not logged by the runtime, so every place that finds them in doubt (the
culprit notes, ``numdiff doctor``, ``numdiff diff`` and ``runs compare``, the fleet summary) tells the
user the same two ways to say which inputs the run used.
"""

from __future__ import annotations

__all__ = ["INPUTS_HINT"]

#: How a user says which graph inputs a run used, in every tool.
INPUTS_HINT = ("pass the run's own inputs (step_inputs=[inputs]; --step-inputs of numdiff culprits, analyze and "
               "submit; the step_inputs column of a batch manifest), or declare that it used the representative ones "
               "(inputs_are_representative=True; --inputs-are-representative)")
