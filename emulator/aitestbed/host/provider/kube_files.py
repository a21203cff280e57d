"""The state directory's files on Kubernetes: a tree as a gzip'd tar (a Secret's content,
what the init container unpacks) and the script a running node's copy of a tree is
replaced with from such a tar.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

FILES_KEY = "files.tgz"  # the Secret's key for the tar
# A running node's copy of a tree becomes the tar on stdin: files extracted over (tar
# unlinks each old file first), then what the tar no longer holds removed.
REPLACE_TREE = r"""set -eu
t=$(mktemp /run/aitestbed-files.XXXXXX)
trap 'rm -f "$t" "$t.list"' EXIT
cat > "$t"
tar -xzf "$t" -C "$0"
tar -tzf "$t" | sed -e 's#^\./##' -e 's#/$##' | grep -v '^\.\?$' | sort > "$t.list"
cd "$0" && find . -mindepth 1 | sed 's#^\./##' | sort | comm -13 "$t.list" - | sort -r |
  while IFS= read -r p; do rm -rf -- "$p"; done
"""


def tar_tree(directory: Path) -> bytes:
    """A directory of the state dir as a gzip'd tar, every file root's, modes kept."""
    buffer = io.BytesIO()

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        if directory.is_dir():
            tar.add(str(directory), arcname=".", filter=as_root)
    return buffer.getvalue()
