"""pyslurm.Job and pyslurm.Jobs, from `squeue --json` (Slurm 22.05's openapi v0.0.38)."""

from __future__ import annotations

import time

from . import _backend
from ._record import Collection, Record
from .error import RPCError

# pyslurm name -> squeue --json field.
_SQUEUE_FIELDS = {
    "name": "name", "account": "account", "user_id": "user_id", "user_name": "user_name",
    "group_id": "group_id", "group_name": "group_name", "cluster": "cluster",
    "partition": "partition", "state": "job_state", "state_reason": "state_reason",
    "priority": "priority", "nice": "nice", "qos": "qos", "is_requeueable": "requeue",
    "requeue_count": "restart_cnt", "batch_host": "batch_host",
    "required_nodes": "required_nodes", "excluded_nodes": "excluded_nodes",
    "num_nodes": "node_count", "cpus": "cpus", "cpus_per_task": "cpus_per_task",
    "ntasks": "tasks", "command": "command", "comment": "comment",
    "working_directory": "current_working_directory", "standard_input": "standard_input",
    "standard_output": "standard_output", "standard_error": "standard_error",
    "submit_time": "submit_time", "eligible_time": "eligible_time",
    "start_time": "start_time", "end_time": "end_time", "dependencies": "dependency",
    "array_id": "array_job_id", "array_task_id": "array_task_id", "licenses": "licenses",
    "reservation": "resv_name", "constraints": "features",
}


def _node_names(value: str | None) -> str | None:
    return value or None


class Job(Record):
    """One job. Job(id) is enough to act on it; Job.load(id) reads its details."""

    _FIELDS = {**_SQUEUE_FIELDS, **{name: (_SQUEUE_FIELDS[name], _node_names) for name in
                                    ("required_nodes", "excluded_nodes", "batch_host")}}
    _DERIVED = ("allocated_nodes", "is_batch_job", "time_limit", "exit_code",
                "exit_code_signal", "ntasks_per_node", "gres_per_node", "run_time")

    def __init__(self, job_id: int | None = None):
        super().__init__()
        self.id = int(job_id) if job_id is not None else None

    @staticmethod
    def load(job_id: int) -> Job:
        # squeue --json of Slurm 22.05 ignores its filters: pick the job out.
        found = [j for j in _backend.run_json("squeue")["jobs"] if j["job_id"] == int(job_id)]
        if not found:
            raise RPCError(msg=f"Invalid job id specified: {job_id}")
        return Job._from_json(found[0])

    @staticmethod
    def _from_json(info: dict) -> Job:
        job = Job(info["job_id"])
        job._info = info
        return job

    def __repr__(self) -> str:
        return f"pyslurm.Job({self.id})"

    # properties that need a conversion --------------------------------
    @property
    def allocated_nodes(self) -> str | None:
        return self._info.get("nodes") or None

    @property
    def is_batch_job(self) -> bool:
        return bool(self._info.get("batch_flag"))

    @property
    def time_limit(self) -> int | str | None:
        """Minutes, or "UNLIMITED"."""
        value = self._info.get("time_limit")
        return "UNLIMITED" if value is None else value

    @property
    def exit_code(self) -> int:
        return (self._info.get("exit_code") or 0) >> 8 & 0xFF

    @property
    def exit_code_signal(self) -> int:
        return (self._info.get("exit_code") or 0) & 0x7F

    @property
    def ntasks_per_node(self) -> int | None:
        return self._info.get("tasks_per_node") or None

    @property
    def gres_per_node(self) -> dict[str, int]:
        return _backend.parse_gres(self._info.get("tres_per_node"))

    @property
    def run_time(self) -> int:
        start, end = self._info.get("start_time") or 0, self._info.get("end_time") or 0
        if not start or self.state == "PENDING":
            return 0
        return max(0, (int(time.time()) if self.state == "RUNNING" else end) - start)

    def to_dict(self) -> dict:
        return {"id": self.id, **super().to_dict()}

    as_dict = to_dict

    # actions -------------------------------------------------------------
    def send_signal(self, signal: str | int, steps: str = "children", hurry: bool = False
                    ) -> None:
        args = ["scancel", f"--signal={signal}"]
        if steps == "batch":
            args.append("--batch")
        elif steps == "all":
            args.append("--full")
        _backend.run(*args, str(self.id))

    def cancel(self) -> None:
        _backend.run("scancel", str(self.id))

    def hold(self, mode: str | None = None) -> None:
        _backend.run("scontrol", "uhold" if mode == "user" else "hold", str(self.id))

    def release(self) -> None:
        _backend.run("scontrol", "release", str(self.id))

    def requeue(self, hold: bool = False) -> None:
        _backend.run("scontrol", "requeuehold" if hold else "requeue", str(self.id))

    def suspend(self) -> None:
        _backend.run("scontrol", "suspend", str(self.id))

    def unsuspend(self) -> None:
        _backend.run("scontrol", "resume", str(self.id))

    def get_batch_script(self) -> str:
        return _backend.run("scontrol", "write", "batch_script", str(self.id), "-")


class Jobs(Collection):
    """Every job Slurm knows (running, pending and recently finished), keyed by id."""

    _key = "id"

    def __init__(self, jobs: list[Job] | dict | None = None, frozen: bool = False):
        super().__init__(jobs)
        self.frozen = frozen

    @staticmethod
    def load(preload_passwd_info: bool = False, frozen: bool = False) -> Jobs:
        jobs = [Job._from_json(j) for j in _backend.run_json("squeue")["jobs"]]
        return Jobs(jobs, frozen=frozen)

    def reload(self) -> Jobs:
        fresh = Jobs.load()
        for job_id in list(self):
            if job_id in fresh:
                self[job_id] = fresh[job_id]
            elif not self.frozen:
                del self[job_id]
        return self

    @property
    def cpus(self) -> int:
        return self._sum("cpus")

    @property
    def ntasks(self) -> int:
        return self._sum("ntasks")
