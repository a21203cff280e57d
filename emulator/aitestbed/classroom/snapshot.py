"""What the instructor's page shows, read as root from the sources the exercise checks use:
the pipeline's one name for its parts (tests, benches and cluster tests import it here).

  collect.py  one command per node and cycle, run as root through the checks' Probe
              (docker exec; never as a learner, never once per learner): sshd's log of
              accepted logins and the live sessions on the login nodes (and the
              Graphcore hop nodes), Slurm's job completion log, queue and nodes on
              each controller, snd's journal on the RDU nodes, the WSJobs and the
              audit log of `csctl get jobs` on the Cerebras management node -> Raw
  parse.py    pure: each section's text -> records (Slurm's through node/slurm_text)
  judge.py    pure: a user's share of the Raw -> what it says of each exercise
  panels.py   pure: a panel per system
  summary.py  pure: Raw, the room, the load, the learners' exercise records -> Page
              (a row per learner, a panel per system)
  page.py     the Page as data (web.py renders it)
  watcher.py  a thread that takes a new Page every `interval` seconds; the web page
              only renders the last one
"""

from __future__ import annotations

from aitestbed.classroom.collect import (
    PARALLEL,
    SECTIONS,
    Layout,
    Raw,
    collect,
    layout_of,
    node_command,
    split_sections,
    stamp,
)
from aitestbed.classroom.judge import HOME_ONLY, judge
from aitestbed.classroom.page import (
    FAILED,
    NOT_STARTED,
    PASSED,
    STARTED,
    STATUSES,
    Cell,
    Column,
    Jobs,
    NodeUse,
    Page,
    Panel,
    Row,
    WsjobLine,
    empty_page,
    iso,
)
from aitestbed.classroom.panels import UNITS, panels
from aitestbed.classroom.parse import (
    SQUEUE,
    SQUEUE_FIELDS,
    US,
    SlurmNode,
    parse_logins,
    parse_nodes,
    parse_sessions,
    parse_squeue,
)
from aitestbed.classroom.summary import summarize
from aitestbed.classroom.watcher import Watcher, practice_room

__all__ = [
    "FAILED", "HOME_ONLY", "NOT_STARTED", "PARALLEL", "PASSED", "SECTIONS", "SQUEUE",
    "SQUEUE_FIELDS", "STARTED", "STATUSES", "UNITS", "US", "Cell", "Column", "Jobs",
    "Layout", "NodeUse", "Page", "Panel", "Raw", "Row", "SlurmNode", "Watcher", "WsjobLine",
    "collect", "empty_page", "iso", "judge", "layout_of", "node_command", "panels",
    "parse_logins", "parse_nodes", "parse_sessions", "parse_squeue", "practice_room",
    "split_sections", "stamp", "summarize",
]
