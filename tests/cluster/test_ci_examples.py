"""examples/ci, the repository a user copies: its scripts through `aitestbed run` (one
system each, side by side), and the CI front doors' one script (scripts/ci-testbed.sh,
which action.yml and the GitLab example call) bringing its own cluster up and down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import docker
import pytest
from aitestbed.host.driver import aitestbed
from aitestbed.host.inventory import project_root

pytestmark = [pytest.mark.cluster, pytest.mark.presubmit]

EXAMPLES = project_root() / "examples" / "ci"


def test_the_example_scripts_run_on_each_system(cluster, tmp_path):
    runs = {"graphcore": ["graphcore/mnist.sbatch", "fails.sbatch"],
            "sambanova": ["sambanova/lenet.sbatch"], "cerebras": ["cerebras/fc_mnist.sh"]}
    results: dict[str, subprocess.CompletedProcess] = {}

    def go(system: str) -> None:
        results[system] = aitestbed(cluster.name, "run", "--system", system, "--dir",
                                    str(EXAMPLES), "--output-dir", str(tmp_path / system),
                                    "--json", "--quiet", *runs[system], timeout=900)

    threads = [threading.Thread(target=go, args=(s,)) for s in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reports = {s: json.loads(r.stdout or "{}") for s, r in results.items()}
    gc = {r["script"]: r for r in reports["graphcore"]["results"]}
    assert results["graphcore"].returncode == 3, results["graphcore"].stderr
    assert gc["graphcore/mnist.sbatch"]["state"] == "COMPLETED"
    assert gc["graphcore/mnist.sbatch"]["figures"]["accuracy_percent"] >= 80
    assert (gc["fails.sbatch"]["state"], gc["fails.sbatch"]["exit_code"]) == ("FAILED", 3)

    assert results["sambanova"].returncode == 0, results["sambanova"].stderr
    (sn,) = reports["sambanova"]["results"]
    assert sn["state"] == "COMPLETED" and "pef/lenet/lenet.pef" in sn["files"]

    assert results["cerebras"].returncode == 0, results["cerebras"].stderr
    (cs,) = reports["cerebras"]["results"]
    assert [(j["type"], j["phase"]) for j in cs["wsjobs"]] == [("compile", "SUCCEEDED"),
                                                               ("execute", "SUCCEEDED")]
    assert "model_dir/checkpoint_50.mdl" in cs["files"]
    assert "Training completed successfully!" in Path(cs["output_file"]).read_text()


@pytest.mark.slow("the CI script brings a whole cluster of its own up and down (a few minutes)")
def test_the_ci_script_brings_a_cluster_up_runs_and_tears_it_down(tmp_path):
    """What action.yml's steps do: up (outputs for later steps), run, down (twice: the
    second finds nothing and still succeeds)."""
    name = f"ci-act-{uuid.uuid4().hex[:6]}"
    github_output = tmp_path / "github_output"
    github_output.write_text("")
    env = {**{k: v for k, v in os.environ.items() if k != "AITESTBED_CLUSTER"},
           "AITESTBED_CI_NAME": name, "AITESTBED_CI_SYSTEMS": "graphcore",
           "GITHUB_OUTPUT": str(github_output), "GITHUB_ENV": str(tmp_path / "github_env"),
           "AITESTBED": str(Path(sys.executable).with_name("aitestbed"))}
    script = str(project_root() / "scripts" / "ci-testbed.sh")

    def ci(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", script, *args], env=env, cwd=EXAMPLES,
                              capture_output=True, text=True, timeout=900, check=False)

    try:
        up = ci("up")
        assert up.returncode == 0, up.stderr
        outputs = dict(line.split("=", 1) for line in github_output.read_text().splitlines()
                       if "=" in line)
        assert outputs["cluster"] == name and Path(outputs["ssh-config"]).is_file()
        run = ci("run", "--system", "graphcore", "--output-dir", str(tmp_path / "out"),
                 "fails.sbatch")
        assert run.returncode == 3, run.stderr
        assert "fails.sbatch: job" in run.stderr and "FAILED (exit 3)" in run.stderr
    finally:
        first, second = ci("down"), ci("down")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    left = [c.name for c in docker.from_env().containers.list(all=True)
            if c.name.startswith(name)]
    assert left == []


def test_the_examples_pytest_file_runs_through_the_plugin(cluster, tmp_path):
    """examples/ci/tests/test_jobs.py as a user runs it (`pytest tests/` with
    AITESTBED_CLUSTER set), here its failing-job test: the plugin's result reads as the
    example expects (state, exit_code, output_file)."""
    env = {**os.environ, "AITESTBED_CLUSTER": cluster.name}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/test_jobs.py", "-k", "failing"], cwd=EXAMPLES, env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout + result.stderr
