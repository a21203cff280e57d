"""Each cluster's /home and /projects on file systems of their own (aitestbed.host.storage):
the decisions, then `up`'s choice, then (as root, with a loop device) the real thing."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from aitestbed.host import storage
from aitestbed.host.errors import AitestbedError
from aitestbed.host.provider import docker_host
from aitestbed.host.provider.base import NOT_ENFORCED
from aitestbed.host.state import ClusterRecord, ClusterState
from aitestbed.node import quota

GIB, MIB = 2**30, 2**20


def test_caps_are_as_wanted_when_they_fit_in_half_the_free_space():
    wanted = {"/home": 20 * GIB, "/projects": 20 * GIB}
    assert storage.plan_sizes(wanted, 100 * GIB) == wanted


def test_caps_shrink_to_half_the_free_space():
    sizes = storage.plan_sizes({"/home": 20 * GIB, "/projects": 20 * GIB}, 14 * GIB)
    assert sizes == {"/home": 3.5 * GIB, "/projects": 3.5 * GIB}
    assert all(s % MIB == 0 for s in sizes.values())
    assert sum(sizes.values()) <= 7 * GIB


def test_too_little_free_space_is_refused_clearly():
    with pytest.raises(AitestbedError, match=r"has 3\.0G free: .*at least 1\.0G each"):
        storage.plan_sizes({"/home": 20 * GIB, "/projects": 20 * GIB}, 3 * GIB, "/state")


def test_layout_keeps_everything_in_the_state_directory():
    layout = storage.Layout(Path("/s/ci-1"), "/projects")
    assert layout.image == Path("/s/ci-1/storage/projects.img")
    assert layout.mount_point == Path("/s/ci-1/storage/projects")
    assert layout.tree == Path("/s/ci-1/storage/projects/tree")
    assert storage.image_mounts(["/software", "/projects", "/home", "/etc/oath/users"]) == [
        "/home", "/projects"]


def test_commands():
    image, target = Path("/s/home.img"), Path("/s/home")
    assert storage.mkfs_argv(image, "ci-1-home") == ["mkfs.btrfs", "-q", "-L", "ci-1-home",
                                                     "/s/home.img"]
    assert storage.mount_argv(image, target) == ["mount", "-t", "btrfs", "-o",
                                                 "loop,nodev,nosuid", "/s/home.img", "/s/home"]
    assert storage.limit_argv(target / "tree/alice", 2**40) == [
        "btrfs", "qgroup", "limit", str(2**40), "/s/home/tree/alice"]
    assert storage.limit_argv(target / "tree/alice", None)[3] == "none"


MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
517 22 0:207 / /root/.local/state/aitestbed/ci\\0401/storage/home rw,nosuid,nodev - btrfs \
/dev/loop3 rw,space_cache=v2,subvolid=5,subvol=/
530 22 0:210 / /mnt/stacked rw - btrfs /dev/loop4 rw
531 530 0:50 / /mnt/stacked rw - tmpfs tmpfs rw
"""


def test_mountinfo_is_read_with_its_escapes():
    entries = storage.parse_mountinfo(MOUNTINFO)
    assert entries[1] == storage.MountEntry(
        "/root/.local/state/aitestbed/ci 1/storage/home", "btrfs", "/dev/loop3")
    assert [e.fstype for e in entries] == ["ext4", "btrfs", "btrfs", "tmpfs"]


def test_mount_state_decides_what_up_does():
    entries = storage.parse_mountinfo(MOUNTINFO)
    root = Path("/root/.local/state/aitestbed/ci 1/storage")
    ours = {"/dev/loop3": str(root / "home.img")}
    assert storage.mount_state(entries, root / "home", root / "home.img", ours) == "mounted"
    # After a host restart: nothing there, mount it.
    assert storage.mount_state(entries, root / "projects", root / "projects.img",
                               {}) == "unmounted"
    # Another image behind the loop device, or the file system on top is not ours.
    with pytest.raises(AitestbedError, match="another file system mounted"):
        storage.mount_state(entries, root / "home", root / "home.img",
                            {"/dev/loop3": "/elsewhere/home.img"})
    with pytest.raises(AitestbedError, match="tmpfs from tmpfs"):
        storage.mount_state(entries, Path("/mnt/stacked"), Path("/x.img"),
                            {"/dev/loop4": "/x.img"})
    # An image deleted while mounted is still the one mounted.
    assert storage.mount_state(entries, root / "home", root / "home.img",
                               {"/dev/loop3": f"{root}/home.img (deleted)"}) == "mounted"


def test_btrfs_listings_are_read():
    subvolumes = storage.parse_subvolumes(
        "ID 256 gen 18 top level 5 path tree/alice\n"
        "ID 257 gen 19 top level 256 path tree/alice/escape\n")
    assert subvolumes == {"tree/alice": 256, "tree/alice/escape": 257}
    limits = storage.parse_limits(
        "Qgroupid    Referenced    Exclusive  Max referenced  Max exclusive   Path \n"
        "--------    ----------    ---------  --------------  -------------   ---- \n"
        "0/5              16384        16384            none           none   <toplevel>\n"
        "0/256           540672       540672         1048576           none   tree/alice\n"
        "1/256                0            0         1048576           none   <0 member>\n")
    assert limits == {5: None, 256: 1048576}


ACCOUNTS = {
    "users": [
        {"name": "alice", "uid": 20001, "gid": 20001, "active": True,
         "quota": {"bytes": 2**40, "files": 1_000_000}},
        {"name": "dave", "uid": 20004, "gid": 20004, "active": False,
         "quota": {"bytes": 0, "files": 1_000_000}},
    ],
    "projects": [
        {"name": "proj1", "gid": 40001, "pi": "alice", "quota": {"bytes": 2**41, "files": 1},
         "purged": False},
        {"name": "orphan", "gid": 40002, "pi": "zed", "quota": {"bytes": 5, "files": 1},
         "purged": False},
        {"name": "gone", "gid": 40003, "pi": "alice", "quota": {"bytes": 5, "files": 1},
         "purged": True},
    ],
}


def test_homes_and_projects_wanted_from_the_accounts():
    homes = storage.wanted_dirs("/home", ACCOUNTS)
    assert homes == [storage.Want("alice", 20001, 20001, 0o700, 2**40, True),
                     storage.Want("dave", 20004, 20004, 0o700, None, False)]
    projects = storage.wanted_dirs("/projects", ACCOUNTS)
    assert projects == [storage.Want("proj1", 20001, 40001, 0o2770, 2**41, True),
                        storage.Want("orphan", 0, 40002, 0o2770, 5, True)]
    assert storage.wanted_dirs("/software", ACCOUNTS) == []


def test_quota_actions_make_what_is_missing_and_fix_only_what_differs():
    homes = storage.wanted_dirs("/home", ACCOUNTS)
    alice, dave = homes
    assert storage.quota_actions("/home", homes, {}) == [("create", alice)]  # not dave's
    same = {"alice": storage.Found("subvolume", 256, 2**40),
            "dave": storage.Found("subvolume", 257, None)}
    assert storage.quota_actions("/home", homes, same) == []
    changed = dict(same, alice=storage.Found("subvolume", 256, MIB))
    assert storage.quota_actions("/home", homes, changed) == [("limit", alice)]
    plain = {"alice": storage.Found("other"), "dave": storage.Found("missing")}
    (action,) = storage.quota_actions("/home", homes, plain)
    assert action[0] == "warn" and "/home/alice is not a subvolume" in action[1]
    assert "reported, not enforced" in action[1]


def test_losetup_listing_is_read():
    out = ("/dev/loop0: [65024]:9980017 (/s/home.img)\n"
           "/dev/loop7: [65024]:9980017 (/s/home.img)\n")
    assert storage.loop_devices(out) == ["/dev/loop0", "/dev/loop7"]


# -- what `up` chooses ----------------------------------------------------------------


def _topology(caps=None):
    node = SimpleNamespace(mounts=("/home", "/projects", "/software"))
    return SimpleNamespace(nodes=[node], common_vars={"shared_storage_caps": caps})


def _record(storage_kind: str, note: str = "") -> ClusterRecord:
    return ClusterRecord(name="t", profile="mini", inventory="", systems=None, user="u",
                         storage=storage_kind, storage_note=note)


def test_a_record_from_before_storage_kinds_keeps_its_volumes(isolated_state):
    state = ClusterState("old")
    state.root.mkdir(parents=True)
    state.record_path.write_text(json.dumps(
        {"name": "old", "profile": "mini", "inventory": "", "systems": None, "user": "u",
         "ports": {}}))
    record = state.load()
    assert record.storage == "volume"
    warnings, notes = docker_host.shared_storage(state, record, _topology())
    assert warnings == [NOT_ENFORCED + docker_host.KEPT_VOLUMES] and notes == []
    assert len(warnings[0].splitlines()) == 1


def test_a_new_cluster_on_a_host_that_cannot_mount_gets_volumes_and_one_line(
        isolated_state, monkeypatch):
    monkeypatch.setattr(storage, "unavailable", lambda: "only root can loop-mount them")
    monkeypatch.setattr(storage, "create", lambda *a: pytest.fail("must not try"))
    state, record = ClusterState("new"), _record("")
    warnings, _ = docker_host.shared_storage(state, record, _topology())
    assert warnings == ["/home and /projects quotas are reported, not enforced: only root "
                        "can loop-mount them"]
    assert state.load().storage == "volume"
    assert storage.on_image(record, "/home") is False
    # The next `up` says the same, and does not try again.
    assert docker_host.shared_storage(state, state.load(), _topology())[0] == warnings


def test_a_new_cluster_whose_mount_is_refused_falls_back(isolated_state, monkeypatch):
    monkeypatch.setattr(storage, "unavailable", lambda: None)

    def refused(root, sizes, label):
        raise storage.Unavailable("cannot mount /home: mount: unknown filesystem type")

    monkeypatch.setattr(storage, "create", refused)
    state, record = ClusterState("new"), _record("")
    warnings, _ = docker_host.shared_storage(state, record, _topology())
    assert "not enforced: cannot mount /home: mount: unknown" in warnings[0]
    assert record.storage == "volume"


def test_a_new_cluster_gets_images_of_the_inventorys_caps(isolated_state, monkeypatch):
    made, mounted = {}, []
    monkeypatch.setattr(storage, "unavailable", lambda: None)
    monkeypatch.setattr(storage, "create", lambda root, sizes, label: made.update(sizes))
    monkeypatch.setattr(storage, "ensure_mounted", lambda layout: mounted.append(layout.mount))
    monkeypatch.setattr(shutil, "disk_usage", lambda p: SimpleNamespace(free=100 * GIB))
    state, record = ClusterState("new"), _record("")
    warnings, notes = docker_host.shared_storage(state, record, _topology({"/home": "2G"}))
    assert made == {"/home": 2 * GIB, "/projects": 20 * GIB}
    assert warnings == [] and notes[0].startswith(
        "/home (2.0G) and /projects (20.0G) on file systems of their own, quotas enforced")
    assert state.load().storage == "image" and mounted == ["/home", "/projects"]
    assert storage.on_image(record, "/projects") and not storage.on_image(
        record, "/software")


def test_an_image_cluster_never_falls_back_to_volumes(isolated_state, monkeypatch):
    def refused(layout):
        raise storage.StorageError(f"cannot mount {layout.mount}: permission denied")

    monkeypatch.setattr(storage, "ensure_mounted", refused)
    monkeypatch.setattr(storage, "create", lambda *a: pytest.fail("must not make new ones"))
    state, record = ClusterState("img"), _record("image")
    with pytest.raises(AitestbedError, match="cannot mount /home: permission denied"):
        docker_host.shared_storage(state, record, _topology())
    assert record.storage == "image"


# -- the real thing (root, a loop device, btrfs) ---------------------------------------


@pytest.fixture
def images(tmp_path):
    """A cluster state directory with 256 MiB images (btrfs' least is 114 MiB) mounted;
    unmounted and detached however the test ends."""
    if os.geteuid() != 0:
        pytest.skip("loop-mounting a file system image needs root")
    reason = storage.unavailable()
    if reason:
        pytest.skip(f"this host cannot make the images: {reason}")
    root = tmp_path / "cluster"
    try:
        try:
            storage.create(root, {"/home": 256 * MIB, "/projects": 256 * MIB}, "unit")
        except storage.Unavailable as err:
            pytest.skip(f"this host refuses the images: {err}")
        yield root
    finally:
        storage.release(root)
    for mount in storage.IMAGE_MOUNTS:
        layout = storage.Layout(root, mount)
        assert storage.current_state(layout) == "unmounted"
        listing = subprocess.run(["losetup", "-j", str(layout.image)], capture_output=True,
                                 text=True, check=True).stdout
        assert listing == "", listing
        layout.image.unlink()


def _write(directory: Path, name: str, size: int, uid: int, gid: int,
           groups: list[int] | None = None) -> subprocess.CompletedProcess:
    """As uid: dd `size` bytes into directory/name (synced), from inside directory."""
    return subprocess.run(
        ["dd", "if=/dev/zero", f"of={name}", "bs=64K", f"count={size // 65536}",
         "conv=fsync"], cwd=directory, user=uid, group=gid, extra_groups=groups or [],
        capture_output=True, text=True, check=False)


def test_a_home_and_a_project_over_their_quota_get_edquot(images):
    accounts = {
        "users": [{"name": "alice", "uid": 20001, "gid": 20001, "active": True,
                   "quota": {"bytes": MIB, "files": 100}}],
        "projects": [{"name": "proj1", "gid": 40001, "pi": "alice",
                      "quota": {"bytes": MIB, "files": 100}, "purged": False}],
    }
    assert storage.apply_accounts(images, ["/home", "/projects", "/software"], accounts) == []
    home = storage.Layout(images, "/home").tree / "alice"
    project = storage.Layout(images, "/projects").tree / "proj1"
    info = home.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (20001, 20001, 0o700)
    info = project.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (20001, 40001, 0o2770)

    small = _write(home, "small", 256 * 1024, 20001, 20001)
    assert small.returncode == 0, small.stderr
    assert (home / "small").stat().st_size == 256 * 1024
    big = _write(home, "big", 2 * MIB, 20001, 20001)
    assert big.returncode != 0 and "Disk quota exceeded" in big.stderr, big.stderr
    assert (home / "big").stat().st_size < 2 * MIB

    in_project = _write(project, "small", 256 * 1024, 20001, 20001, [40001])
    assert in_project.returncode == 0, in_project.stderr
    over = _write(project, "big", 2 * MIB, 20001, 20001, [40001])
    assert over.returncode != 0 and "Disk quota exceeded" in over.stderr, over.stderr

    # A raised quota lets the same write through; applying again changes nothing.
    accounts["users"][0]["quota"]["bytes"] = 8 * MIB
    assert storage.apply_accounts(images, ["/home"], accounts) == []
    again = _write(home, "big", 2 * MIB, 20001, 20001)
    assert again.returncode == 0, again.stderr
    found = storage._found(storage.Layout(images, "/home"), ["alice"])
    assert found["alice"].kind == "subvolume" and found["alice"].limit == 8 * MIB

    # What myquota sees in a container: its home is a btrfs subvolume, so enforced.
    assert quota.bytes_enforced(home) is True
    assert quota.bytes_enforced(storage.Layout(images, "/home").tree) is False


def test_the_image_is_a_hard_cap_for_the_whole_tree(images):
    tree = storage.Layout(images, "/home").tree
    full = subprocess.run(["dd", "if=/dev/zero", f"of={tree / 'fill'}", "bs=1M", "count=400"],
                          capture_output=True, text=True, check=False)
    assert full.returncode != 0 and "No space left on device" in full.stderr, full.stderr
    assert (tree / "fill").stat().st_size < 256 * MIB


def test_up_mounts_the_images_again_after_a_host_restart(images):
    layout = storage.Layout(images, "/home")
    (layout.tree / "kept").write_text("kept\n")
    storage.release_one(layout)  # as a restart leaves it: not mounted, no loop device
    assert not layout.tree.exists()  # so no container can start on an empty /home
    assert storage.ensure_mounted(layout) is True
    assert (layout.tree / "kept").read_text() == "kept\n"
    assert storage.ensure_mounted(layout) is False  # already mounted: nothing to do


def test_a_user_removing_the_home_is_not_blocked_by_the_subvolume(images):
    """archive-home and expire-project remove homes and projects from a container."""
    accounts = {"users": [{"name": "carol", "uid": 20003, "gid": 20003, "active": True,
                           "quota": {"bytes": MIB, "files": 1}}], "projects": []}
    storage.apply_accounts(images, ["/home"], accounts)
    home = storage.Layout(images, "/home").tree / "carol"
    (home / "results.txt").write_text("results\n")
    shutil.rmtree(home)
    assert not home.exists()
    accounts["users"][0]["active"] = False  # offboarded: not made again
    assert storage.apply_accounts(images, ["/home"], accounts) == []
    assert not home.exists()


def test_a_plain_directory_in_the_way_is_reported_not_replaced(images):
    tree = storage.Layout(images, "/projects").tree
    (tree / "demo").mkdir()
    (tree / "demo" / "kept.txt").write_text("kept\n")
    accounts = {"users": [], "projects": [{"name": "demo", "gid": 40009, "pi": "nobody",
                                           "quota": {"bytes": MIB, "files": 1},
                                           "purged": False}]}
    (warning,) = storage.apply_accounts(images, ["/projects"], accounts)
    assert "/projects/demo is not a subvolume" in warning
    assert (tree / "demo" / "kept.txt").read_text() == "kept\n"


def test_edquot_is_the_errno_cp_reports():
    assert os.strerror(errno.EDQUOT) == "Disk quota exceeded"
