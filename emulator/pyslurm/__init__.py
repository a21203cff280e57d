"""pyslurm-compatible Python API for this testbed's Slurm 22.05.

Real pyslurm has no release for Slurm 22.05, so this module gives Python
tooling the commonly used part of pyslurm 25.11's API, with pyslurm's names,
backed by the cluster's real Slurm commands (their JSON output where Slurm
22.05 has it). Inside the cluster it runs the commands directly; on the host
it runs them on a login node over ssh (see `pyslurm._backend`).

Covered:
  Job(job_id), Job.load(job_id), Job.cancel(), .send_signal(), .hold(),
      .release(), .requeue(), .suspend(), .unsuspend(), .get_batch_script(),
      .to_dict()/.as_dict(), and the job properties listed in Job.
  Jobs.load(), Jobs.reload(); a dict keyed by job id; .cpus, .ntasks.
  JobSubmitDescription(**kwargs).submit() -> job id (sbatch itself reads the
      script's #SBATCH lines).
  Node.load(name), Nodes.load() (dict keyed by name), Partition.load(name),
      Partitions.load() (dict keyed by name), their to_dict()/as_dict().
  Errors: PyslurmError, RPCError (with .errno and .msg), ArgumentError.
Not covered: JobSubmitDescription.load_sbatch_options()/load_environment(),
pyslurm.db (no slurmdbd here), job steps and statistics, reservations,
modify()/create()/delete() of nodes and partitions, multi-cluster keys.
"""

from .error import ArgumentError, PyslurmError, RPCError
from .job import Job, Jobs
from .node import Node, Nodes
from .partition import Partition, Partitions
from .submission import JobSubmitDescription

__version__ = "25.11.0"

__all__ = ["ArgumentError", "Job", "JobSubmitDescription", "Jobs", "Node", "Nodes",
           "Partition", "Partitions", "PyslurmError", "RPCError", "__version__"]
