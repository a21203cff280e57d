"""`aitestbed load`: what the load runs at each level (plan), and start/stop against a fake
cluster (a probe that records the commands, the account playbooks replaced)."""

from __future__ import annotations

import json

import pytest
from aitestbed.classroom import load, roster
from aitestbed.classroom import room as classroom_room
from aitestbed.classroom.roster import ClassroomError
from aitestbed.host.inventory import load as load_inventory
from aitestbed.host.state import ClusterRecord, ClusterState

pytestmark = pytest.mark.unit

SYSTEMS = ["cerebras", "graphcore", "sambanova"]
GROUPS = {"cerebras": 3001, "graphcore": 3002, "sambanova": 3003}


def capacity(gc=(16, 16), sn30=(8,), sn10=(8, 8), cs2=2) -> load.Capacity:
    """The mini profile's (by default)."""
    slurm = tuple(load.SlurmCluster(name, system, gres, per_node, submit)
                  for name, system, gres, per_node, submit in (
                      ("graphcore", "graphcore", "ipu", gc, "gc-login-01"),
                      ("sn30", "sambanova", "rdu", sn30, "sambanova"),
                      ("sn10", "sambanova", "rdu", sn10, "sm-01")) if per_node)
    appliance = load.Appliance(systems=cs2, max_execute=1, release="2.1.1",
                               login="cer-login-01") if cs2 else None
    return load.Capacity(slurm=slurm, cerebras=appliance)


def by_cluster(jobs):
    found = {}
    for job in jobs:
        found.setdefault(job.where, []).append(job)
    return found


def first_fit(nodes, sizes) -> bool:
    """Whether Slurm, placing the jobs in order wherever one fits, places them all."""
    free = list(nodes)
    for size in sizes:
        for i, room in enumerate(free):
            if room >= size:
                free[i] -= size
                break
        else:
            return False
    return True


# plan ------------------------------------------------------------------------------------
def test_light_holds_about_half_and_one_job_waits_for_the_whole_cluster():
    cap = capacity()
    jobs = by_cluster(load.plan("light", SYSTEMS, cap))
    for cluster in cap.slurm:
        running = [j for j in jobs[cluster.name] if not j.waits]
        waiting = [j for j in jobs[cluster.name] if j.waits]
        held = sum(j.held for j in running)
        assert 0 < held <= cluster.total // 2 + 1, cluster.name
        assert len(running) >= 2, "several users' jobs run"
        assert all(j.nice == load.NICE_LIGHT for j in running)
        # The waiting job asks for every accelerator: (Resources) while anything runs,
        # and it yields to everyone (learners and the load's own next runs).
        assert len(waiting) == 1 and waiting[0].held == cluster.total
        assert waiting[0].nodes == len(cluster.per_node)
        assert waiting[0].nice == load.NICE_WAITING > load.NICE_LIGHT
    cerebras = jobs["cerebras"]
    assert len(cerebras) == 1 and cerebras[0].time_scale == 1 and cerebras[0].pause > 60


def test_busy_holds_everything_and_queues_three_more_at_everyones_priority():
    cap = capacity()
    jobs = by_cluster(load.plan("busy", SYSTEMS, cap))
    for cluster in cap.slurm:
        running = [j for j in jobs[cluster.name] if not j.waits]
        waiting = [j for j in jobs[cluster.name] if j.waits]
        assert sum(j.held for j in running) == cluster.total
        assert first_fit(cluster.per_node, [j.count for j in running]), cluster.name
        assert len(waiting) == 3 and all(j.nice == 0 for j in running + waiting)
        # The first waiting job cannot start while the others run: (Resources), then
        # (Priority) behind it.
        assert waiting[0].count == max(cluster.per_node)
    cerebras = jobs["cerebras"]
    assert len(cerebras) == 2 and len({j.user for j in cerebras}) == 2
    assert {j.count for j in cerebras} == {1, 2} and all(j.time_scale == 2 for j in cerebras)


@pytest.mark.parametrize("per_node", [(16,) * 4, (8,) * 8, (8, 8), (8,), (2, 2, 2), (1,),
                                      (4, 4, 4)])
def test_busy_fills_nodes_without_holes_whatever_their_number(per_node):
    cap = capacity(gc=per_node, sn30=(), sn10=(), cs2=0)
    running = [j for j in load.plan("busy", SYSTEMS, cap) if not j.waits]
    assert sum(j.held for j in running) == sum(per_node)
    assert first_fit(per_node, [j.count for j in running])
    assert [j.count for j in running] == sorted((j.count for j in running), reverse=True)


def test_jobs_look_like_peoples_work_and_never_share_a_script():
    jobs = load.plan("busy", SYSTEMS, capacity(gc=(16,) * 4, sn30=(8,) * 8))
    users = {j.user for j in jobs}
    assert users == set(load.load_names("load", load.USERS["busy"]))
    scripts = [load.script_path(j) for j in jobs if j.system != "cerebras"]
    assert len(scripts) == len(set(scripts))
    names = [j.name for j in jobs if j.where == "sn30"]
    assert names[0] == "Gpt1.5B_run.sh" and "Gpt1.5B_run_2.sh" in names


def test_only_the_systems_present_get_a_load():
    jobs = load.plan("light", ["graphcore"], capacity())
    assert {j.where for j in jobs} == {"graphcore"}
    assert load.plan("busy", ["groq"], capacity()) == []
    assert load.plan("light", SYSTEMS, load.Capacity()) == []


def test_users_are_as_many_as_the_jobs_need():
    jobs = load.plan("light", ["cerebras"], capacity())
    assert [j.user for j in jobs] == ["load01"]
    assert load.user_systems(load.plan("light", SYSTEMS, capacity()))["load01"] == [
        "graphcore", "sambanova"]


@pytest.mark.parametrize("level", ["", "heavy", "LIGHT", "light "])
def test_a_level_that_does_not_exist_is_refused(level):
    with pytest.raises(ClassroomError, match="--level must be one of light, busy"):
        load.plan(level, SYSTEMS, capacity())


# what the users type ----------------------------------------------------------------------
def test_sbatch_requests_ask_as_each_system_does():
    jobs = load.plan("light", SYSTEMS, capacity())
    gc = next(j for j in jobs if j.where == "graphcore" and j.waits)
    assert "--ipus=16" in gc.request() and "--nodes=2" in gc.request()
    assert not any("gres" in o for o in gc.request())  # refused on Graphcore
    sn = next(j for j in jobs if j.where == "sn30" and not j.waits)
    assert f"--gres=rdu:{sn.count}" in sn.request() and f"--nice={load.NICE_LIGHT}" in sn.request()
    assert f"--time=00:{sn.minutes + load.SPARE_MINUTES:02d}:00" in sn.request()


def test_a_job_holds_its_accelerators_then_submits_itself_again():
    job = load.plan("busy", ["graphcore"], capacity())[0]
    script = load.job_script(job)
    path = load.script_path(job)
    assert path == f"/home/{job.user}/jobs/graphcore/{job.name}.sbatch"
    assert script.startswith("#!/bin/bash\n#SBATCH --job-name=")
    assert f"sleep {job.minutes * 60}\nsbatch {path}\n" in script
    command = load.as_user(job.user, load.submit_command(job))
    assert command.startswith(f"runuser -l {job.user} -c ")
    assert f"sbatch --parsable {path}" in command


def test_cerebras_runs_follow_the_guide():
    jobs = load.plan("busy", ["cerebras"], capacity())
    script = load.cerebras_script(jobs[1])
    assert "pip install -q cerebras_pytorch==2.1.1" in script  # the guide's set-up
    assert "git checkout -q Release_2.1.1" in script
    assert "AITESTBED_TIME_SCALE=2 python run.py CSX --job_labels name=fc_mnist_hpo" in script
    assert "--num_csx=2" in script and "while :; do" in script
    command = load.cerebras_command(jobs[0])
    assert "setsid nohup bash /home/load01/cerebras-runs.sh" in command


# uids ------------------------------------------------------------------------------------
def test_uids_are_free_ones_above_everyone_and_former_load_users_keep_theirs():
    users = {"learner01": {"uid": 20001, "gid": 20001}, "load02": {"uid": 20009,
                                                                     "active": False}}
    uids = load.choose_uids(["load01", "load02", "load03"], users, {"workshop": {"gid": 20000}},
                            GROUPS, former={"load02": 20009})
    assert uids == {"load01": 20002, "load02": 20009, "load03": 20003}


@pytest.mark.parametrize(("users", "projects", "message"), [
    ({"load01": {"uid": 1001, "active": True}}, {}, "already exists on this cluster"),
    ({"load01": {"uid": 1001, "active": False}}, {}, "was not made by `load start`"),
    ({}, {"load02": {"gid": 40000}}, "'load02' is the name of a group"),
])
def test_someone_elses_name_is_refused(users, projects, message):
    with pytest.raises(ClassroomError, match=message):
        load.choose_uids(["load01", "load02"], users, projects, GROUPS, former={})


# start and stop against a fake cluster -------------------------------------------------------
class FakeProbe:
    """Answers as the nodes would: sbatch prints a job id, squeue lists two jobs."""

    def __init__(self, fail_on: str = ""):
        self.commands: list[tuple[str, str]] = []
        self.fail_on = fail_on
        self.next_id = 100

    def run(self, node: str, command: str, user: str | None = None) -> tuple[int, str]:
        self.commands.append((node, command))
        if self.fail_on and self.fail_on in command:
            return 1, "sbatch: error: Batch job submission failed"
        if "sbatch --parsable" in command:
            self.next_id += 1
            return 0, f"{self.next_id}\n"
        if "echo $!" in command:
            return 0, "4242\n"
        if command.startswith("squeue"):
            return 0, "101\n102\n"
        if "cancel_wsjobs" in command:
            return 0, "cancelled wsjob-abc (load04)\n"
        return 0, ""

    def ran(self, text: str) -> list[tuple[str, str]]:
        return [(n, c) for n, c in self.commands if text in c]


@pytest.fixture
def cluster(isolated_state, monkeypatch):
    """A recorded mini cluster `fake` (no containers), its playbooks recorded."""
    state = ClusterState("fake")
    state.save(ClusterRecord(name="fake", profile="mini", inventory="", systems=None,
                             user="learner"))
    calls = []
    monkeypatch.setattr(classroom_room, "onboard",
                        lambda st, accounts, names, *a, **k: calls.append(("onboard", accounts,
                                                                            names)))
    monkeypatch.setattr(classroom_room, "offboard",
                        lambda st, names, *a, **k: calls.append(("offboard", names)))
    return state, calls


def test_start_onboards_once_submits_as_the_users_and_records_it(cluster):
    state, calls = cluster
    probe = FakeProbe()
    started = load.start("fake", "light", probe=probe)
    assert [c[0] for c in calls] == ["onboard"]
    assert calls[0][2] == ["load01", "load02", "load03", "load04"]
    assert calls[0][1]["accounts"][3] == {"name": "load04", "uid": 20003,
                                          "systems": ["graphcore", "sambanova", "cerebras"]}
    saved = roster.load_load(state.root)
    assert saved == started and saved.level == "light"
    assert saved.users == {"load01": 20000, "load02": 20001, "load03": 20002, "load04": 20003}
    assert saved.jobs["graphcore"] == ["101", "102", "103", "104"]
    assert set(saved.jobs) == {"graphcore", "sn30", "sn10", "cerebras"}
    assert "pid 4242 on cer-login-01" in saved.jobs["cerebras"][0]
    submits = probe.ran("sbatch --parsable")
    assert {n for n, _ in submits} == {"gc-login-01", "sambanova", "sm-01"}
    assert all(c.startswith("runuser -l load0") for _, c in submits)
    assert "\n".join(load.describe(saved)).count("Slurm jobs submitted") == 3


def test_start_twice_is_refused_and_says_at_which_level(cluster):
    load.start("fake", "busy", probe=FakeProbe())
    with pytest.raises(ClassroomError, match="already running on cluster 'fake' at level busy"):
        load.start("fake", "light", probe=FakeProbe())


def test_a_bad_level_changes_nothing(cluster):
    state, calls = cluster
    with pytest.raises(ClassroomError, match="--level must be one of"):
        load.start("fake", "medium", probe=FakeProbe())
    assert calls == [] and roster.load_load(state.root) is None


def test_a_failed_submission_leaves_a_record_that_stop_cleans_up(cluster):
    state, calls = cluster
    with pytest.raises(ClassroomError, match="load stop` removes what was started"):
        load.start("fake", "light", probe=FakeProbe(fail_on="sbatch --parsable"))
    assert roster.load_load(state.root).users  # stop knows whom to remove
    result = load.stop("fake", probe=FakeProbe())
    assert result["stopped"] and roster.load_load(state.root) is None


def test_stop_without_a_load_says_so(cluster):
    result = load.stop("fake", probe=FakeProbe())
    assert result == {"stopped": False, "message": "no load is running on cluster 'fake'"}


def test_stop_cancels_kills_offboards_and_forgets(cluster):
    state, calls = cluster
    load.start("fake", "busy", probe=FakeProbe())
    probe = FakeProbe()
    result = load.stop("fake", probe=probe)
    users = [f"load0{i}" for i in range(1, 7)]
    assert calls[-1] == ("offboard", users)
    assert result["stopped"] and result["users"] == users and result["level"] == "busy"
    assert result["slurm_jobs"] == {"graphcore": 2, "sn10": 2, "sn30": 2}
    assert result["wsjobs"] == 1 and "stopped the busy load" in result["message"]
    controllers = {n for n, _ in probe.ran("scancel --user load01")}
    assert controllers == {"gc-slurmctld", "sn30-slurmctld", "sn10-slurmctld"}
    every_node = {n.name for n in load_inventory("mini").nodes}
    assert {n for n, _ in probe.ran("pkill -KILL -U 20000,20001")} == every_node
    # The processes die before the last scancel (a run ending meanwhile resubmits) and
    # before the wsjobs are cancelled (a loop would start another run).
    order = [c for _, c in probe.commands]
    last_kill = max(i for i, c in enumerate(order) if c.startswith("pkill"))
    assert any(c.startswith("scancel") for c in order[last_kill:])
    assert all(i > last_kill for i, c in enumerate(order) if "cancel_wsjobs" in c)
    assert probe.ran("rm -rf --one-file-system /home/load06")
    assert roster.load_load(state.root) is None
    assert load.former_users(state.root)["load06"] == 20005


def test_a_second_start_gives_former_load_users_their_uids_again(cluster):
    state, _ = cluster
    load.start("fake", "busy", probe=FakeProbe())
    load.stop("fake", probe=FakeProbe())
    registry = state.registry()
    registry.users = {name: {"uid": uid, "gid": uid, "active": False}
                      for name, uid in load.former_users(state.root).items()}
    registry.save()
    again = load.start("fake", "light", probe=FakeProbe())
    assert again.users == {f"load0{i}": 20000 + i - 1 for i in range(1, 5)}


def test_capacity_comes_from_the_inventory():
    mini = load.capacity(load_inventory("mini"))
    assert {c.name: (c.per_node, c.submit) for c in mini.slurm} == {
        "graphcore": ((16, 16), "gc-login-01"), "sn30": ((8,), "sambanova"),
        "sn10": ((8, 8), "sm-01")}
    assert mini.cerebras == load.Appliance(systems=2, max_execute=1, release="2.1.1",
                                           login="cer-login-01")
    cs3 = load.capacity(load_inventory("alcf-2026-mini"))
    assert cs3.cerebras is None and any("Release 2.10" in n for n in cs3.notes)


def test_the_record_of_former_load_users_is_json(cluster):
    state, _ = cluster
    load.start("fake", "light", probe=FakeProbe())
    data = json.loads((roster.room_dir(state.root) / load.FORMER).read_text())
    assert data == {"load01": 20000, "load02": 20001, "load03": 20002, "load04": 20003}
