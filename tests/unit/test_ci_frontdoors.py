"""The CI front doors: scripts/ci-testbed.sh (with a fake aitestbed recording its calls),
the GitHub action (action.yml) and the example repository in examples/ci."""

from __future__ import annotations

import os
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ci-testbed.sh"
EXAMPLES = ROOT / "examples" / "ci"
SUBCOMMANDS = ("setup", "key", "load", "up", "save-cache", "run", "down")

# A stand-in for aitestbed: one line per call in $FAKE_LOG (its arguments, shell-quoted);
# answers as the real one does for what the script uses. FAKE_FAIL=<command> makes that
# command fail; FAKE_NO_CLUSTER=1 makes destroy find nothing; FAKE_RUN_STATUS is run's.
FAKE = r"""#!/bin/bash
printf '%q ' "$@" >>"$FAKE_LOG"; echo >>"$FAKE_LOG"
[ "$1" = --name ] && shift 2
command=$1; [ "$command" = images ] && command="images-$2"
if [ "${FAKE_FAIL:-}" = "$command" ]; then echo "aitestbed: $command went wrong" >&2; exit 1; fi
case $command in
  images-key) echo "${FAKE_KEY:-k1}" ;;
  images-save) echo "images ${FAKE_KEY:-k1}" >"$3" ;;
  images-load) test -f "$3" ;;
  ssh-config) echo "Host gc-login-01" >"$3" ;;
  up) echo "cluster ready" >&2 ;;
  destroy)
    if [ -n "${FAKE_NO_CLUSTER:-}" ]; then
      echo "aitestbed: there is no cluster named 'x'" >&2; exit 1
    fi
    echo "cluster destroyed" >&2 ;;
  run) echo "run output"; exit "${FAKE_RUN_STATUS:-0}" ;;
esac
"""


@pytest.fixture
def ci(tmp_path):
    """Run the script with a fake aitestbed and make, in a clean CI-less environment."""
    fake = tmp_path / "bin" / "aitestbed"
    fake.parent.mkdir()
    fake.write_text(FAKE)
    fake.chmod(0o755)
    make = tmp_path / "bin" / "make"
    make.write_text('#!/bin/bash\nprintf "make %s\\n" "$*" >>"$FAKE_LOG"\n'
                    'exit "${FAKE_MAKE_STATUS:-0}"\n')
    make.chmod(0o755)
    log = tmp_path / "calls"
    home = tmp_path / "home"
    home.mkdir()
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "CI_", "AITESTBED", "FAKE_"))}
    base.update(HOME=str(home), AITESTBED=str(fake), MAKE=str(make), FAKE_LOG=str(log))

    class Runner:
        path = tmp_path

        def __call__(self, *args: str, **env: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(SCRIPT), *args], env={**base, **env},
                                  capture_output=True, text=True, timeout=60, check=False)

        def calls(self) -> list[list[str]]:
            if not log.exists():
                return []
            return [shlex.split(line) for line in log.read_text().splitlines()]

    return Runner()


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_the_script_parses_and_is_executable():
    assert os.access(SCRIPT, os.X_OK)
    result = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr


def test_help_names_every_command(ci):
    result = ci("help")
    assert result.returncode == 0
    for command in SUBCOMMANDS:
        assert re.search(rf"^  {command}\b", result.stdout, re.M), command


@pytest.mark.parametrize("args, message", [
    ((), "ci-testbed.sh: no command given"),
    (("bogus",), "ci-testbed.sh: unknown command 'bogus'"),
    (("--frob", "up"), "ci-testbed.sh: unknown option '--frob'"),
    (("--name",), "ci-testbed.sh: --name needs a cluster name"),
    (("up", "graphcore"), "ci-testbed.sh: up takes no arguments (systems: AITESTBED_CI_SYSTEMS)"),
    (("run",), "ci-testbed.sh: run needs arguments for aitestbed run (--system S SCRIPT...)"),
])
def test_bad_input_gets_the_synopsis_and_one_line(ci, args, message):
    result = ci(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("usage: ci-testbed.sh [--name NAME] {setup|key|load|up|")
    assert lines[1:] == [message]
    assert ci.calls() == []


def test_up_writes_github_outputs_env_and_path(ci):
    output, env, path = (ci.path / n for n in ("output", "env", "path"))
    runner_temp = ci.path / "runner-temp"
    result = ci("up", GITHUB_RUN_ID="4242", GITHUB_RUN_ATTEMPT="2",
                AITESTBED_CI_SYSTEMS="graphcore,sambanova", GITHUB_OUTPUT=str(output),
                GITHUB_ENV=str(env), GITHUB_PATH=str(path), RUNNER_TEMP=str(runner_temp))
    assert result.returncode == 0, result.stderr
    ssh_config = ci.path / "home" / ".ssh" / "aitestbed-ci-4242-2.conf"
    assert ci.calls() == [
        ["--name", "ci-4242-2", "up", "--profile", "mini", "--systems", "graphcore,sambanova"],
        ["--name", "ci-4242-2", "ssh-config", "-o", str(ssh_config)]]
    assert output.read_text().splitlines() == ["cluster=ci-4242-2", f"ssh-config={ssh_config}"]
    assert ssh_config.read_text() == "Host gc-login-01\n"
    assert {"AITESTBED_CLUSTER=ci-4242-2", "AITESTBED_CI_NAME=ci-4242-2",
            f"AITESTBED_HOME={ROOT}"} <= set(env.read_text().splitlines())
    # PATH gets the aitestbed command alone, not the venv's python and pip.
    links = runner_temp / "bin-ci-4242-2"
    assert path.read_text().splitlines() == [str(links)]
    assert [p.name for p in links.iterdir()] == ["aitestbed"]
    assert (links / "aitestbed").resolve() == ci.path / "bin" / "aitestbed"
    assert ci("down", GITHUB_RUN_ID="4242", GITHUB_RUN_ATTEMPT="2",
              RUNNER_TEMP=str(runner_temp)).returncode == 0
    assert not links.exists() and not ssh_config.exists()


def test_up_without_systems_brings_every_system_and_names_from_gitlab(ci):
    dotenv = ci.path / "testbed.env"
    result = ci("up", CI_JOB_ID="77", CI_DOTENV=str(dotenv))
    assert result.returncode == 0, result.stderr
    assert ci.calls()[0] == ["--name", "ci-77", "up", "--profile", "mini"]
    # GitLab's dotenv reports: KEY=VALUE, nothing else.
    assert dotenv.read_text().splitlines()[0] == "AITESTBED_CLUSTER=ci-77"
    assert all(re.fullmatch(r"[A-Z_]+=\S+", line) for line in dotenv.read_text().splitlines())
    # stdout: export lines a shell sources (`up > testbed.env && . ./testbed.env`).
    sourced = subprocess.run(["bash", "-c", f'{result.stdout}\necho "$AITESTBED_CLUSTER";'
                              'command -v aitestbed'], capture_output=True, text=True,
                             env={"PATH": "/usr/bin:/bin"}, check=False)
    links = ci.path / "home" / ".cache" / "aitestbed" / "bin-ci-77"
    assert sourced.stdout.split() == ["ci-77", str(links / "aitestbed")]


def test_the_name_option_wins_and_a_failed_up_fails(ci):
    output = ci.path / "output"
    result = ci("--name", "mine", "up", FAKE_FAIL="up", GITHUB_RUN_ID="1",
                GITHUB_OUTPUT=str(output))
    assert result.returncode == 1
    assert ci.calls() == [["--name", "mine", "up", "--profile", "mini"]]
    assert last_line(result.stderr) == "ci-testbed.sh: aitestbed up failed (exit 1)"
    assert not output.exists()


def test_down_destroys_and_removes_the_ssh_config(ci):
    config = ci.path / "home" / ".ssh" / "aitestbed-ci-local.conf"
    config.parent.mkdir()
    config.write_text("Host x\n")
    result = ci("down")
    assert result.returncode == 0, result.stderr
    assert ci.calls() == [["--name", "ci-local", "destroy"]]
    assert not config.exists()


def test_down_tolerates_a_cluster_already_gone(ci):
    result = ci("down", FAKE_NO_CLUSTER="1", AITESTBED_CI_NAME="ci-9")
    assert result.returncode == 0, result.stderr
    assert ci.calls() == [["--name", "ci-9", "destroy"]]
    assert last_line(result.stderr) == "ci-testbed.sh: cluster ci-9 is already gone"


def test_down_without_aitestbed_has_nothing_to_remove(ci):
    result = ci("down", AITESTBED=str(ci.path / "nowhere" / "aitestbed"))
    assert result.returncode == 0, result.stderr
    assert "no cluster was brought up" in result.stderr


def test_down_fails_when_destroy_fails_otherwise(ci):
    result = ci("down", FAKE_FAIL="destroy")
    assert result.returncode == 1
    assert "aitestbed: destroy went wrong" in result.stderr
    assert last_line(result.stderr) == "ci-testbed.sh: aitestbed destroy failed (exit 1)"


def test_run_passes_its_arguments_and_keeps_the_exit_status(ci):
    args = ("--system", "graphcore", "--junit", "j.xml", "a.sbatch", "b c.sbatch")
    result = ci("run", *args, FAKE_RUN_STATUS="3", AITESTBED_CI_NAME="ci-5")
    assert result.returncode == 3
    assert result.stdout == "run output\n"
    assert ci.calls() == [["--name", "ci-5", "run", *args]]
    assert ci("run", "x", AITESTBED=str(ci.path / "none")).returncode == 125


def test_setup_makes_venv_and_engine_loads_the_cache_and_prints_the_key(ci):
    cache = ci.path / "images.tar.zst"
    cache.write_text("images k1\n")
    output = ci.path / "output"
    result = ci("setup", AITESTBED_IMAGE_CACHE=str(cache), AITESTBED_PROJECT=str(ROOT),
                GITHUB_OUTPUT=str(output), FAKE_KEY="abc123")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "abc123\n"
    assert output.read_text() == "key=abc123\n"
    assert ci.calls() == [["make", "-C", str(ROOT), "venv", "engine"],
                          ["images", "load", str(cache)],
                          ["images", "key", "--profile", "mini"]]


def test_setup_without_a_cache_loads_nothing_and_a_failed_make_stops_it(ci):
    result = ci("setup", AITESTBED_IMAGE_CACHE=str(ci.path / "none.tar.zst"))
    assert result.returncode == 0, result.stderr
    assert [c[0:2] for c in ci.calls()] == [["make", "-C"], ["images", "key"]]
    failed = ci("setup", FAKE_MAKE_STATUS="2")
    assert failed.returncode == 1
    assert last_line(failed.stderr) == "ci-testbed.sh: make venv engine failed (exit 2)"


def test_a_damaged_cache_is_dropped_not_fatal(ci):
    cache = ci.path / "images.tar.zst"
    cache.write_text("garbage")
    (ci.path / "images.tar.zst.key").write_text("k1\n")
    result = ci("load", AITESTBED_IMAGE_CACHE=str(cache), FAKE_FAIL="images-load")
    assert result.returncode == 0, result.stderr
    assert "could not load" in result.stderr
    assert list(ci.path.glob("images.tar.zst*")) == []


def test_a_machine_loads_the_same_cache_file_once(ci):
    cache = ci.path / "images.tar.zst"
    cache.write_text("images k1\n")
    (ci.path / "images.tar.zst.key").write_text("k1\n")
    env = {"AITESTBED_IMAGE_CACHE": str(cache)}
    assert ci("load", **env).returncode == 0
    assert (ci.path / "images.tar.zst.loaded").read_text() == "k1\n"
    again = ci("load", **env)
    assert again.returncode == 0
    assert "(key k1) are loaded already" in again.stderr
    assert [c[:2] for c in ci.calls()] == [["images", "load"]]
    # Another file (a new key restored by the Actions cache) is loaded.
    (ci.path / "images.tar.zst.key").write_text("k2\n")
    assert ci("load", **env).returncode == 0
    assert [c[:2] for c in ci.calls()] == [["images", "load"]] * 2


def test_save_cache_writes_when_missing_or_stale_only(ci):
    cache = ci.path / "cache" / "images.tar.zst"
    env = {"AITESTBED_IMAGE_CACHE": str(cache)}
    assert ci("save-cache", **env, FAKE_KEY="k1").returncode == 0
    assert cache.read_text() == "images k1\n"
    assert (cache.parent / "images.tar.zst.key").read_text() == "k1\n"
    # The engine has the images it saved: loading that file here again is skipped.
    assert "are loaded already" in ci("load", **env).stderr
    saves = [c for c in ci.calls() if c[:2] == ["images", "save"]]
    assert len(saves) == 1 and saves[0][3:] == ["--profile", "mini"]
    assert saves[0][2].endswith("images.tar.zst") and saves[0][2] != str(cache)

    current = ci("save-cache", **env, FAKE_KEY="k1")
    assert "is current (key k1)" in current.stderr
    assert len([c for c in ci.calls() if c[:2] == ["images", "save"]]) == 1

    assert ci("save-cache", **env, FAKE_KEY="k2").returncode == 0
    assert cache.read_text() == "images k2\n"
    assert len([c for c in ci.calls() if c[:2] == ["images", "save"]]) == 2


def test_a_failed_save_leaves_no_file(ci):
    cache = ci.path / "images.tar.zst"
    result = ci("save-cache", AITESTBED_IMAGE_CACHE=str(cache), FAKE_FAIL="images-save")
    assert result.returncode == 1
    assert list(ci.path.glob("*images.tar.zst*")) == []


# -- the GitHub action ------------------------------------------------------------------
def action() -> dict:
    return yaml.safe_load((ROOT / "action.yml").read_text())


def test_the_action_is_composite_with_its_inputs_and_outputs():
    doc = action()
    assert doc["runs"]["using"] == "composite"
    assert set(doc["inputs"]) == {"mode", "systems", "name", "cache"}
    assert doc["inputs"]["mode"]["default"] == "up"
    assert doc["inputs"]["cache"]["default"] == "true"
    assert doc["outputs"]["cluster"]["value"] == "${{ steps.up.outputs.cluster }}"
    assert doc["outputs"]["ssh-config"]["value"] == "${{ steps.up.outputs.ssh-config }}"


def test_every_action_step_goes_through_the_script():
    steps = action()["runs"]["steps"]
    called = []
    for step in steps:
        if "uses" in step:
            assert step["uses"] in ("actions/cache/restore@v4", "actions/cache/save@v4")
            assert "steps.setup.outputs.key" in step["with"]["key"]
            continue
        assert step["shell"] == "bash"
        match = re.fullmatch(r'"\$GITHUB_ACTION_PATH/scripts/ci-testbed\.sh" ([a-z-]+)',
                             step["run"].strip())
        if match is None:  # the one step that refuses a bad mode
            assert step["if"] == "inputs.mode != 'up' && inputs.mode != 'down'"
            assert step["run"].strip().endswith("exit 1")
            continue
        called.append((match.group(1), step["if"]))
    assert [c for c, _ in called] == ["setup", "load", "up", "save-cache", "down"]
    assert all(c in SUBCOMMANDS for c, _ in called)
    assert dict(called)["down"] == "inputs.mode == 'down'"
    assert all("inputs.mode == 'up'" in condition for c, condition in called if c != "down")


def test_the_action_caches_the_file_the_script_uses():
    steps = {s.get("id", s.get("name")): s for s in action()["runs"]["steps"]}
    default = "${{ env.AITESTBED_IMAGE_CACHE || '~/.cache/aitestbed/images.tar.zst' }}"
    paths = [default, default + ".key"]
    assert steps["restore"]["with"]["path"].splitlines() == paths
    assert steps["Save the node images"]["with"]["path"].splitlines() == paths
    assert steps["restore"]["with"]["key"] == steps["Save the node images"]["with"]["key"]
    assert 'CACHE=${AITESTBED_IMAGE_CACHE:-$HOME/.cache/aitestbed/images.tar.zst}' in \
        SCRIPT.read_text()


# -- the example repository -------------------------------------------------------------
def test_the_example_workflow_uses_the_action_and_tears_down_always():
    workflow = yaml.safe_load((EXAMPLES / ".github" / "workflows" / "testbed.yml").read_text())
    steps = workflow["jobs"]["testbed"]["steps"]
    uses = [s for s in steps if s.get("uses", "").endswith("/aitestbed@main")]
    assert uses[0]["with"]["systems"] == "graphcore,sambanova,cerebras"
    assert uses[-1]["with"] == {"mode": "down"} and uses[-1]["if"] == "always()"
    assert steps[-1] is uses[-1]
    runs = " ".join(s.get("run", "") for s in steps)
    for script in ("graphcore/mnist.sbatch", "sambanova/lenet.sbatch", "cerebras/fc_mnist.sh",
                   "fails.sbatch"):
        assert script in runs and (EXAMPLES / script).is_file()
    assert runs.count("--junit") == 4
    upload = next(s for s in steps if s.get("uses") == "actions/upload-artifact@v4")
    assert upload["if"] == "always()" and "junit-*.xml" in upload["with"]["path"]


def test_the_gitlab_job_goes_through_the_script_and_tears_down_after():
    job = yaml.safe_load((EXAMPLES / ".gitlab-ci.yml").read_text())["testbed"]
    before = "\n".join(job["before_script"])
    for command in ("setup", "up", "save-cache"):
        assert f"scripts/ci-testbed.sh {command}" in before
    assert job["after_script"] == ["${AITESTBED_HOME:-$HOME/aitestbed}/scripts/ci-testbed.sh down"]
    assert job["artifacts"]["when"] == "always"
    assert job["artifacts"]["reports"]["junit"] == "junit-*.xml"


@pytest.mark.parametrize("script, directive", [
    ("graphcore/mnist.sbatch", "#SBATCH --ipus=1"),
    ("sambanova/lenet.sbatch", "#SBATCH --gres=rdu:1"),
    ("fails.sbatch", "#SBATCH --job-name=ci-fails"),
    ("cerebras/fc_mnist.sh", None),
])
def test_the_example_scripts_parse_and_ask_for_their_devices(script, directive):
    path = EXAMPLES / script
    assert os.access(path, os.X_OK)
    assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0
    lines = path.read_text().splitlines()
    assert lines[0].startswith("#!/bin/bash")
    if directive:
        # Slurm reads #SBATCH lines only before the first command.
        header = [line for line in lines[1:] if line and not line.startswith("#")][0]
        assert lines.index(directive) < lines.index(header)


def test_the_failing_example_fails_with_3_and_says_so(tmp_path):
    result = subprocess.run(["bash", str(EXAMPLES / "fails.sbatch")], capture_output=True,
                            text=True, cwd=tmp_path, check=False)
    assert result.returncode == 3
    assert "fails on purpose with exit status 3" in result.stdout
    assert "this line goes to stderr" in result.stderr


def test_the_mnist_example_trains_one_epoch_on_one_ipu(allocation, mnist_dir, monkeypatch,
                                                        capsys):
    """graphcore/mnist.py on the host's PopTorch facade, holding one IPU as the job does."""
    allocation(1)
    monkeypatch.setattr(sys, "argv", ["mnist.py", "--data", str(mnist_dir)])
    runpy.run_path(str(EXAMPLES / "graphcore" / "mnist.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "Trained one epoch: 4000 images, 125 steps of 32, last loss " in out, out
    accuracy = re.search(r"^Accuracy on 1920 test images: ([\d.]+)%$", out, re.M)
    assert accuracy and float(accuracy.group(1)) > 80, out


def test_the_lenet_example_commands_compile_and_train(snd, mnist_dir, tmp_path):
    """lenet.sbatch's two lines, as written (fewer steps), on the installed starter and an
    snd of the test's own holding the job's RDU."""
    import shutil

    starter = tmp_path / "lenet"
    shutil.copytree(ROOT / "roles" / "sambaflow" / "files" / "apps" / "starters" / "lenet",
                    starter)
    lines = [line for line in (EXAMPLES / "sambanova" / "lenet.sbatch").read_text().splitlines()
             if line.startswith('python "$LENET/lenet.py" ')]
    assert [line.split()[2] for line in lines] == ["compile", "run"]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SF_RNT")}
    environment.update(LENET=str(starter), PYTHONPATH=str(ROOT / "emulator"),
                       AITESTBED_SN_MNIST=str(mnist_dir), SF_RNT_LOG_FILE=str(tmp_path / "sn.log"),
                       OMP_NUM_THREADS="1")
    job = tmp_path / "job"
    job.mkdir()
    script = "set -e\n" + "\n".join(lines).replace("--max-steps=200", "--max-steps=20")
    script = script.replace("python ", f"{sys.executable} ")
    result = subprocess.run(["bash", "-c", script], cwd=job, env=environment,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    assert "Epoch [1/1], Step [20/3750], Loss: " in result.stdout
    assert re.search(r"^Test Accuracy: [\d.]+ Loss: [\d.]+$", result.stdout, re.M)
    assert (job / "pef" / "lenet" / "lenet.pef").is_file()
