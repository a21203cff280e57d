"""What a person sees while the image playbook runs (host/playbook on_task, images'
_TaskProgress): every task's name as it starts, and a line at most every 15 s."""

from __future__ import annotations

import pytest
from aitestbed.host import images, playbook

pytestmark = pytest.mark.unit


def test_each_task_is_reported_as_it_starts_and_the_log_keeps_everything(tmp_path,
                                                                          monkeypatch):
    book = tmp_path / "two.yml"
    book.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n"
                    "    - name: First step\n      ansible.builtin.debug: {msg: one}\n"
                    "    - name: Second step\n      ansible.builtin.debug: {msg: two}\n")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    here: {ansible_connection: local}\n")
    monkeypatch.setattr(playbook, "playbook_path", lambda name: book)
    seen = []
    log = tmp_path / "log" / "run.log"
    result = playbook.run_playbook("two", [inventory], log=log, on_task=seen.append)
    assert result.returncode == 0, log.read_text()
    assert seen == ["First step", "Second step"]
    assert "ok: [here]" in log.read_text()


def test_progress_says_a_line_at_most_every_fifteen_seconds(monkeypatch, tmp_path):
    clock = iter([0.0, 1.0, 16.0, 17.0, 40.0])
    monkeypatch.setattr(images.time, "monotonic", lambda: next(clock))
    said = []
    monkeypatch.setattr(images, "say", said.append)
    progress = images._TaskProgress(tmp_path / "image.log")
    for task in ("common : a", "common : b", "sshd : c", "slurm : d"):
        progress(task)
    assert said == [f"  the image playbook runs (full log: {tmp_path / 'image.log'})",
                    "    16 s, task 2: common : b", "    40 s, task 4: slurm : d"]
