"""myquota: usage of homes and projects against their quotas, as a user checks it."""

import json
import os
from pathlib import Path

import pytest
from aitestbed.node import quota

ALICE, BOB, CAROL = 20001, 20002, 20003


@pytest.fixture
def testbed(tmp_path, monkeypatch):
    """A fake /home and /projects under tmp_path, and an accounts file for them."""
    accounts = {
        "groups": [{"name": "cerebras", "gid": 3001}],
        "projects": [
            {"name": "demo_proj", "gid": 40001, "pi": "alice", "members": ["alice", "bob"],
             "systems": ["cerebras"], "quota": {"bytes": 2 << 40, "files": 2_000_000},
             "end_date": "2027-06-30"},
            {"name": "llm_scaling", "gid": 40002, "pi": "carol", "members": ["alice", "carol"],
             "systems": ["sambanova"]},  # no quota: the documented default
            {"name": "secret_proj", "gid": 40003, "pi": "carol", "members": ["carol"],
             "systems": ["graphcore"], "quota": {"bytes": 2 << 40, "files": 2_000_000}},
        ],
        "users": [
            {"name": name, "uid": uid, "gid": uid, "groups": [], "shell": "/bin/bash",
             "authorized_keys": [], "active": True}
            for name, uid in (("alice", ALICE), ("bob", BOB), ("carol", CAROL))
        ],
    }
    for d in ("home/alice/data", "home/bob", "home/carol",
              "projects/demo_proj", "projects/llm_scaling", "projects/secret_proj"):
        (tmp_path / d).mkdir(parents=True)
    path = tmp_path / "accounts.json"
    path.write_text(json.dumps(accounts))
    monkeypatch.setenv("AITESTBED_ACCOUNTS", str(path))
    monkeypatch.setenv("AITESTBED_QUOTA_ROOT", str(tmp_path))
    as_user(monkeypatch, ALICE)
    return tmp_path, accounts


def as_user(monkeypatch, uid):
    monkeypatch.setattr(os, "getuid", lambda: uid)


def save(root, accounts):
    (root / "accounts.json").write_text(json.dumps(accounts))


def run(capsys, *argv):
    code = quota.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def by_name(out):
    return {q["name"]: q for q in json.loads(out)["quotas"]}


def expected_usage(path):
    """What a block quota would charge: every inode once, st_blocks * 512."""
    items = [path, *path.rglob("*")]
    return sum(p.lstat().st_blocks * 512 for p in items), len(items)


def test_usage_counts_every_file_directory_and_symlink(testbed, capsys):
    root, _ = testbed
    home = root / "home" / "alice"
    (home / "data" / "big.bin").write_bytes(os.urandom(300_000))
    (home / "notes.txt").write_text("hello\n")
    (home / "link").symlink_to("/etc")  # counted as one inode, never followed
    os.link(home / "notes.txt", home / "data" / "hardlink.txt")  # same inode: counted once
    code, out, _ = run(capsys, "--json")
    assert code == 0
    alice = by_name(out)["alice"]
    assert alice["used_files"] == 5  # alice/, data/, big.bin, notes.txt, link
    assert alice["used_bytes"] >= 300_000
    used, _ = expected_usage(home)
    assert alice["used_bytes"] == used - (home / "data" / "hardlink.txt").lstat().st_blocks * 512
    assert alice["path"] == "/home/alice" and alice["filesystem"] == "/home"


def test_a_member_of_two_projects_sees_her_home_and_both(testbed, capsys):
    code, out, _ = run(capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["Name", "Type", "Filesystem"]
    assert set(lines[1]) == {"="}
    rows = {line.split()[0]: line.split() for line in lines[2:] if line and line[0] != " "}
    assert rows["alice"][1:3] == ["User", "/home"]
    assert rows["demo_proj"][1:3] == ["Project", "/projects"]
    assert rows["llm_scaling"][1:3] == ["Project", "/projects"]
    assert "secret_proj" not in out
    assert rows["alice"][4] == "1.00T" and rows["alice"][7] == "1,000,000"
    assert rows["llm_scaling"][4] == "2.00T" and rows["llm_scaling"][7] == "2,000,000"
    assert rows["demo_proj"][6] == "1"  # the empty project directory itself
    assert "OVER QUOTA" not in out.split("\n\n")[0]
    assert "reported, not enforced" in out


def test_a_tiny_quota_is_marked_over_and_the_exit_status_stays_zero(testbed, capsys):
    root, accounts = testbed
    accounts["users"][0]["quota"] = {"bytes": 1024, "files": 1_000_000}
    accounts["projects"][0]["quota"] = {"bytes": 2 << 40, "files": 0}
    save(root, accounts)
    (root / "home" / "alice" / "data" / "f").write_bytes(b"x" * 10_000)
    code, out, _ = run(capsys)
    assert code == 0
    marked = {line.split()[0] for line in out.splitlines() if line.endswith("OVER QUOTA")}
    assert marked == {"alice", "demo_proj"}
    code, out, _ = run(capsys, "--json")
    quotas = by_name(out)
    assert quotas["alice"]["over_quota"] and quotas["alice"]["bytes_percent"] > 100
    assert quotas["demo_proj"]["over_quota"] and quotas["demo_proj"]["files_percent"] is None
    assert not quotas["llm_scaling"]["over_quota"]


def test_json_reports_quotas_and_defaults(testbed, capsys):
    root, _ = testbed
    (root / "projects" / "demo_proj" / "a").write_bytes(b"y" * 5000)
    code, out, _ = run(capsys, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["enforced"] is False
    quotas = by_name(out)
    assert list(quotas) == ["alice", "demo_proj", "llm_scaling"]
    assert quotas["alice"]["quota_bytes"] == 1 << 40 and quotas["alice"]["quota_files"] == 10**6
    assert quotas["llm_scaling"]["quota_bytes"] == 2 << 40
    assert quotas["llm_scaling"]["quota_files"] == 2 * 10**6
    demo = quotas["demo_proj"]
    used, files = expected_usage(root / "projects" / "demo_proj")
    assert (demo["used_bytes"], demo["used_files"]) == (used, files) and files == 2
    assert demo["bytes_percent"] == round(100 * used / (2 << 40), 2)
    assert demo["files_percent"] == 0.0


def test_one_project_for_its_members(testbed, capsys):
    code, out, _ = run(capsys, "-p", "llm_scaling", "--json")
    assert code == 0 and list(by_name(out)) == ["llm_scaling"]


def test_a_non_member_may_not_ask_for_a_project(testbed, capsys):
    code, out, err = run(capsys, "--project", "secret_proj")
    assert code == 1 and out == ""
    assert err.startswith("myquota: ") and "secret_proj" in err and "Traceback" not in err


def test_unknown_project_and_user_are_refused(testbed, monkeypatch, capsys):
    code, _, err = run(capsys, "-p", "no_such_proj")
    assert code == 1 and "no such project: no_such_proj" in err
    as_user(monkeypatch, 0)
    code, _, err = run(capsys, "-u", "mallory")
    assert code == 1 and "no such user in this testbed: mallory" in err


def test_only_root_may_ask_for_another_user(testbed, monkeypatch, capsys):
    code, out, err = run(capsys, "--user", "bob")
    assert code == 1 and out == ""
    assert err == "myquota: only root may ask for another user's quota\n"
    code, out, _ = run(capsys, "-u", "alice", "--json")  # herself: fine
    assert code == 0 and "alice" in by_name(out)
    as_user(monkeypatch, 0)
    code, out, _ = run(capsys, "-u", "bob", "--json")
    assert code == 0 and list(by_name(out)) == ["bob", "demo_proj"]
    code, out, _ = run(capsys, "-p", "secret_proj", "--json")
    assert code == 0 and list(by_name(out)) == ["secret_proj"]


def test_root_without_an_account_sees_everyone(testbed, monkeypatch, capsys):
    as_user(monkeypatch, 0)
    monkeypatch.setattr(quota.pwd, "getpwuid", lambda uid: type("pw", (), {"pw_name": "root"}))
    code, out, _ = run(capsys, "--json")
    assert code == 0
    assert list(by_name(out)) == ["alice", "bob", "carol", "demo_proj", "llm_scaling",
                                  "secret_proj"]


def test_unreadable_directories_are_skipped(testbed, monkeypatch, capsys):
    root, _ = testbed
    private = root / "home" / "alice" / "private"
    private.mkdir()
    (private / "hidden").write_text("x")
    (root / "home" / "alice" / "visible").write_text("x")
    real_scandir = os.scandir

    def scandir(path):
        if os.fspath(path) == str(private):
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(quota.os, "scandir", scandir)
    code, out, err = run(capsys, "--json")
    assert code == 0 and err == ""
    assert by_name(out)["alice"]["used_files"] == 4  # alice/, data/, private/, visible


def test_missing_home_and_old_accounts_files(testbed, capsys):
    root, accounts = testbed
    del accounts["projects"]
    save(root, accounts)
    (root / "home" / "alice" / "data").rmdir()
    (root / "home" / "alice").rmdir()
    code, out, _ = run(capsys, "--json")
    assert code == 0
    quotas = by_name(out)
    assert list(quotas) == ["alice"] and quotas["alice"]["used_files"] == 0


def test_unreadable_accounts_file_is_a_clear_error(testbed, monkeypatch, capsys):
    root, _ = testbed
    monkeypatch.setenv("AITESTBED_ACCOUNTS", str(root / "missing.json"))
    code, _, err = run(capsys)
    assert code == 1 and "cannot read the accounts file" in err and "Traceback" not in err


def test_bad_options_exit_non_zero(testbed, capsys):
    with pytest.raises(SystemExit) as exc:
        quota.main(["-u", "alice", "-p", "demo_proj"])
    assert exc.value.code == 2


def test_human_sizes_are_powers_of_1024_with_two_decimals():
    assert quota.human(0) == "0.00K"
    assert quota.human(4096) == "4.00K"
    assert quota.human(int(1.21 * 2**30)) == "1.21G"
    assert quota.human(3 * 2**20 // 2) == "1.50M"
    assert quota.human(2 << 40) == "2.00T"


def test_a_purged_project_is_listed_only_when_asked_for(testbed, capsys):
    root, accounts = testbed
    accounts["projects"][1]["purged"] = True
    save(root, accounts)
    (root / "projects" / "llm_scaling").rmdir()
    code, out, _ = run(capsys, "--json")
    assert code == 0 and list(by_name(out)) == ["alice", "demo_proj"]
    code, out, _ = run(capsys, "-p", "llm_scaling", "--json")
    assert code == 0 and by_name(out)["llm_scaling"]["used_files"] == 0


def test_the_accounts_file_is_the_one_the_cluster_mount_carries(monkeypatch):
    from aitestbed.node.config import CLUSTER_DIR
    monkeypatch.delenv("AITESTBED_ACCOUNTS", raising=False)
    assert quota.accounts_path() == CLUSTER_DIR / "accounts.json"


MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
600 22 0:207 /tree /home rw,nosuid,nodev - btrfs /dev/loop3 rw,subvolid=5,subvol=/
601 22 0:208 / /projects\\040x rw - btrfs /dev/loop4 rw
"""


def test_the_file_system_of_a_path_is_its_longest_mount_point():
    assert quota.fs_type(Path("/home/alice/data"), MOUNTINFO) == "btrfs"
    assert quota.fs_type(Path("/home"), MOUNTINFO) == "btrfs"
    assert quota.fs_type(Path("/homes"), MOUNTINFO) == "ext4"
    assert quota.fs_type(Path("/projects x/p"), MOUNTINFO) == "btrfs"


def test_a_plain_directory_is_not_enforced(tmp_path):
    assert quota.bytes_enforced(tmp_path) is False  # not a btrfs subvolume
    assert quota.bytes_enforced(tmp_path / "missing") is False


def test_enforced_quotas_say_so_with_the_clusters_cap(testbed, capsys, monkeypatch):
    root, _ = testbed
    monkeypatch.setattr(quota, "bytes_enforced", lambda path: True)
    code, out, _ = run(capsys)
    assert code == 0
    assert 'Byte quotas are enforced: a write past one fails with "Disk quota exceeded"' in out
    assert "File quotas are reported, not enforced." in out
    assert "This cluster's /home holds" in out and "This cluster's /projects holds" in out
    assert "reported, not enforced, in the emulated testbed" not in out
    code, out, _ = run(capsys, "--json")
    data = json.loads(out)
    assert data["enforced"] is True and all(q["enforced"] for q in data["quotas"])


def test_only_some_enforced_says_which(testbed, capsys, monkeypatch):
    monkeypatch.setattr(quota, "bytes_enforced", lambda path: path.name == "alice")
    code, out, _ = run(capsys)
    assert "Byte quotas are enforced on /home/alice: " in out
    assert "The others, and file quotas, are reported, not enforced." in out
    assert "This cluster's /home holds" in out and "/projects holds" not in out
    code, out, _ = run(capsys, "--json")
    assert json.loads(out)["enforced"] is False
