"""A job: one bisection or comparison, from the user's inputs to a result document. The faces
the CLI and the daemon call; job/run.py wires the rooms (docs/architecture.md)."""

from attrib.job.inputs import Plan, plan, verify_mode
from attrib.job.run import built_checkout, run_bisect, run_compare

__all__ = ["Plan", "built_checkout", "plan", "run_bisect", "run_compare", "verify_mode"]
