"""Quotas are enforced on a cluster with file systems of its own (aitestbed.host.storage):
the practice user writing past a small home quota gets what the real tools print,
"Disk quota exceeded". (Files kept across `down`/`up`: test_lifecycle.)"""

from __future__ import annotations

import json

import pytest
import yaml

pytestmark = pytest.mark.presubmit

LOGIN = "gc-login-01"
MIB = 2**20
HEADROOM = 32 * MIB  # over the home's usage: du and btrfs' own count differ by a little


def _account(cluster) -> dict:
    """The practice account as the inventory describes it (uid, systems), from what the
    cluster published."""
    accounts = json.loads((cluster.state.common_dir / "accounts.json").read_text())
    systems = {g["name"] for g in accounts["groups"]}
    me = next(u for u in accounts["users"] if u["name"] == cluster.user)
    return {"name": cluster.user, "uid": me["uid"],
            "systems": [g for g in me["groups"] if g in systems], "quota": me["quota"]}


def _onboard(cluster, tmp_path, account: dict) -> None:
    """Staff change a quota as they change any account: the onboarding playbook with the
    account's new description (aitestbed sets the limit on the host)."""
    people = tmp_path / "people.yml"
    people.write_text(yaml.safe_dump({"accounts": [account]}))
    result = cluster.driver.cli("playbook", "onboard-user", "-e", f"user={account['name']}",
                                "-e", f"@{people}", timeout=900)
    assert result.returncode == 0, result.stdout[-3000:]


def test_writing_past_the_home_quota_fails_with_disk_quota_exceeded(cluster, tmp_path):
    record = cluster.record
    if record.get("storage") != "image":
        pytest.skip(f"cluster {cluster.name} keeps /home on Docker volumes, where quotas are "
                    f"reported, not enforced: {record.get('storage_note') or 'made before'}")
    account = _account(cluster)
    # As root: what the user cannot read counts too.
    used = cluster.host(LOGIN).check_output(f"du -s --block-size=1 /home/{cluster.user}")
    limit = int(used.split()[0]) + HEADROOM
    _onboard(cluster, tmp_path, dict(account, quota={"bytes": limit}))
    try:
        rc, out = cluster.run(LOGIN, 'dd if=/dev/zero of="$HOME/quota-small.bin" bs=1M count=1 '
                                     "conv=fsync")
        assert rc == 0, out  # under the quota: written
        rc, out = cluster.run(LOGIN, f'dd if=/dev/zero of="$HOME/quota-big.bin" bs=1M '
                                     f"count={3 * HEADROOM // MIB} conv=fsync")
        assert rc != 0 and "Disk quota exceeded" in out, out
        rc, out = cluster.run(LOGIN, 'cp "$HOME/quota-small.bin" "$HOME/quota-copy.bin"')
        assert rc != 0 and "Disk quota exceeded" in out, out
        rc, out = cluster.run(LOGIN, "myquota --json")
        assert rc == 0, out
        home = next(q for q in json.loads(out)["quotas"] if q["type"] == "user")
        assert home["enforced"] and home["quota_bytes"] == limit
    finally:
        cluster.run(LOGIN, 'rm -f "$HOME"/quota-*.bin')
        _onboard(cluster, tmp_path, account)  # the quota it had
    rc, out = cluster.run(LOGIN, 'dd if=/dev/zero of="$HOME/quota-big.bin" bs=1M '
                                 f'count={3 * HEADROOM // MIB} conv=fsync; rc=$?; '
                                 'rm -f "$HOME/quota-big.bin"; exit $rc')
    assert rc == 0, out
