"""`aitestbed run`: run a project's job scripts on a system of a running cluster, as a
user, from this machine, and return their result (CI integration testing).

  plan      the decisions, pure: submit host, scheduler states, exit status, figures
  transfer  what goes to the cluster (git's file list) and what comes back (safely)
  runner    the loop: copy, submit, follow, bring back
  report    JUnit XML and JSON
"""

from aitestbed.host.jobrun.plan import (
    TIMED_OUT,
    TOOL_ERROR,
    JobResult,
    PlanError,
    RunReport,
    parse_size,
)
from aitestbed.host.jobrun.runner import Options, run

__all__ = ["TIMED_OUT", "TOOL_ERROR", "JobResult", "Options", "PlanError", "RunReport",
           "parse_size", "run"]
