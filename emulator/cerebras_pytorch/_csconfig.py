"""cstorch.utils.CSConfig: how a job uses the Wafer-Scale Cluster.

Its own module (stdlib only) because both the data pipeline's package, cstorch.utils,
which names it, and the appliance's run_program, which makes the default, need it: the
pipeline submits through the appliance, so the appliance cannot import cstorch.utils
back (that was a circle).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CSConfig:
    """How a job uses the Wafer-Scale Cluster (ignored on CPU)."""

    num_csx: int = 1
    mount_dirs: list[str] = field(default_factory=list)
    python_paths: list[str] = field(default_factory=list)
    num_workers_per_csx: int = 0
    job_labels: list[str] = field(default_factory=list)  # "key=value"
    job_time_sec: int | None = None
    max_wgt_servers: int = 24
    max_act_per_csx: int = 1
    mgmt_address: str | None = None
    mgmt_namespace: str | None = None
    credentials_path: str | None = None
    debug_args: object = None
    transfer_processes: int | None = None
    disable_version_check: bool = False
    precision_opt_level: int = 1
    job_priority: str = "p2"  # p1 (highest), p2 or p3

    def __post_init__(self) -> None:
        # None (a key the params do not set) means the default
        for name, default in (("num_csx", 1), ("num_workers_per_csx", 0),
                              ("max_wgt_servers", 24), ("max_act_per_csx", 1)):
            if getattr(self, name) is None:
                setattr(self, name, default)
        for name in ("mount_dirs", "python_paths", "job_labels"):
            if getattr(self, name) is None:
                setattr(self, name, [])
        self.disable_version_check = bool(self.disable_version_check)
        self.job_priority = str(self.job_priority or "p2").lower()
        if self.job_priority not in ("p1", "p2", "p3"):
            raise ValueError(f"Invalid job priority {self.job_priority!r}: one of p1, p2, p3")
        if int(self.num_csx) < 1:
            raise ValueError(f"num_csx must be at least 1, got {self.num_csx}")
        for label in self.job_labels:
            key, sep, _ = str(label).partition("=")
            if not sep or not key:
                raise ValueError(f"Invalid job label {label!r}: expected key=value")

    def labels(self) -> dict[str, str]:
        return dict(str(label).split("=", 1) for label in self.job_labels)
