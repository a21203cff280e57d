"""The release workflow (.github/workflows/release-images.yml): on a version tag it logs in
and runs `make release-images`, the command a cluster test runs against a registry on
127.0.0.1 (tests/cluster/test_image_cache.py); the Makefile's target refuses without a
registry."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_a_version_tag_builds_and_pushes_with_the_make_target():
    workflow = yaml.safe_load((ROOT / ".github/workflows/release-images.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert triggers["push"]["tags"] == ["v*"] and "workflow_dispatch" in triggers
    assert workflow["permissions"] == {"contents": "read", "packages": "write"}
    steps = workflow["jobs"]["images"]["steps"]
    runs = [step.get("run", "") for step in steps]
    assert any("docker login" in run for run in runs)
    assert runs[-1].strip() == 'make release-images REGISTRY="$REGISTRY"'
    login = next(step for step in steps if "docker login" in step.get("run", ""))
    assert "ghcr.io/${OWNER,,}/aitestbed" in login["run"]  # GHCR wants lower case


def test_make_release_images_without_a_registry_says_how_to_call_it():
    result = subprocess.run(["make", "-s", "-C", str(ROOT), "-o", "venv", "-o", "engine",
                             "-o", ".venv/bin/.installed-run", "release-images", "REGISTRY="],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: make release-images REGISTRY=HOST[:PORT]/PREFIX")
