"""Homes on the shared /home, as node-init and roles/accounts make them: the attacks of
the security review (A9, A10, B22) performed by a user who plants links in their home."""

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from aitestbed.node import homes

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creates homes for another uid")

UID = GID = 65534  # nobody: a user who is not root
KEYS = {"id_ed25519": b"PRIVATE\n", "id_ed25519.pub": b"ssh-ed25519 AAAA hop\n"}
USER = {"name": "alice", "uid": UID, "gid": GID, "authorized_keys": ["ssh-ed25519 AAAA hop"]}


@pytest.fixture
def root():
    """A /home the user can traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="aitestbed-homes-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def canary(root):
    """A root-owned directory and file the user must never get."""
    directory = root.parent / f"{root.name}-canary"
    directory.mkdir(mode=0o755)
    (directory / "secret").write_text("ORIGINAL\n")
    (directory / "secret").chmod(0o644)
    yield directory
    shutil.rmtree(directory)


def owner_mode(path: Path) -> tuple[int, int, int]:
    info = os.lstat(path)
    return info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)


def test_a_new_home_is_private_and_holds_the_user_s_keys(root):
    done = homes.ensure_home(USER, KEYS, root)
    home = root / "alice"
    assert owner_mode(home) == (UID, GID, 0o700)
    assert owner_mode(home / ".ssh") == (UID, GID, 0o700)
    assert owner_mode(home / ".ssh" / "id_ed25519") == (UID, GID, 0o600)
    assert owner_mode(home / ".ssh" / "id_ed25519.pub") == (UID, GID, 0o644)
    assert (home / ".ssh" / "authorized_keys").read_text() == "ssh-ed25519 AAAA hop\n"
    assert f"created {home}" in done
    assert homes.ensure_home(USER, KEYS, root) == []  # a second start changes nothing


def test_a_home_keeps_the_mode_its_user_gave_it(root):
    homes.ensure_home(USER, KEYS, root)
    (root / "alice").chmod(0o755)  # the guide's `chmod a+xr ~/` for the Cerebras appliance
    homes.ensure_home(USER, KEYS, root)
    assert owner_mode(root / "alice")[2] == 0o755


def test_a_linked_ssh_directory_gives_the_user_nothing(root, canary):
    homes.ensure_home(USER, KEYS, root)
    ssh = root / "alice" / ".ssh"
    shutil.rmtree(ssh)
    ssh.symlink_to(canary)  # ~/.ssh -> a root-owned directory (/etc in the review)
    homes.ensure_home(USER, KEYS, root)
    assert owner_mode(canary) == (0, 0, 0o755)
    assert sorted(p.name for p in canary.iterdir()) == ["secret"]
    assert ssh.is_symlink()


def test_a_dangling_ssh_link_does_not_stop_the_node(root):
    homes.ensure_home(USER, KEYS, root)
    ssh = root / "alice" / ".ssh"
    shutil.rmtree(ssh)
    ssh.symlink_to("/nonexistent/aitestbed-canary")
    homes.ensure_home(USER, KEYS, root)  # no FileExistsError: the node starts
    assert ssh.is_symlink() and not Path("/nonexistent/aitestbed-canary").exists()


def test_linked_key_files_are_neither_followed_nor_replaced(root, canary):
    homes.ensure_home(USER, KEYS, root)
    ssh = root / "alice" / ".ssh"
    for name in ("id_ed25519", "authorized_keys"):
        (ssh / name).unlink()
        (ssh / name).symlink_to(canary / "secret")
    homes.ensure_home(USER, {**KEYS}, root)
    assert (canary / "secret").read_text() == "ORIGINAL\n"
    assert owner_mode(canary / "secret") == (0, 0, 0o644)
    assert (ssh / "id_ed25519").is_symlink()


def test_a_key_the_user_put_there_is_kept(root):
    homes.ensure_home(USER, KEYS, root)
    key = root / "alice" / ".ssh" / "id_ed25519"
    key.unlink()
    key.write_bytes(b"MINE\n")
    homes.ensure_home(USER, KEYS, root)
    assert key.read_bytes() == b"MINE\n"


def test_a_home_that_is_not_the_user_s_is_left_alone(root):
    (root / "alice").mkdir(mode=0o750)  # owned by root
    homes.ensure_home(USER, KEYS, root)
    assert owner_mode(root / "alice") == (0, 0, 0o750)
    assert not (root / "alice" / ".ssh").exists()


def test_roles_accounts_hands_the_homes_module_each_user_and_its_hop_keys(tmp_path):
    """The role's task, its loop and vars templated by Ansible's own engine, gives
    aitestbed.node.homes exactly the key files node-init installs from the state dir."""
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    from .ansible_render import _expression, _templar, role_defaults, role_task

    _AnsibleCollectionFinder()._install()  # as ansible-playbook does: FQCN lookups resolve
    keys_dir = tmp_path / "users"
    (keys_dir / "alice").mkdir(parents=True)
    for name, data in KEYS.items():
        (keys_dir / "alice" / name).write_bytes(data)
    task = role_task("accounts", "main.yml",
                     "Create the homes, with the cluster's hop keys and the authorized keys")
    play = {**role_defaults("accounts"), "accounts_keys_dir": str(keys_dir),
            "accounts_resolved": {"users": [{**USER, "active": True},
                                            {**USER, "name": "gone", "active": False}]}}
    assert "loop" not in task  # one command for every user
    scope = dict(play)
    scope.update({k: _expression(_templar(scope), v) for k, v in task["vars"].items()})
    request = json.loads(_expression(_templar(scope), task["ansible.builtin.command"]["stdin"]))
    (user,) = request["users"]  # the active ones
    assert user["name"] == "alice"
    keys = {k: v.encode() for k, v in user["keys"].items()}
    assert keys == homes.cluster_keys(keys_dir / "alice")
    assert user["authorized_keys"] == USER["authorized_keys"]
