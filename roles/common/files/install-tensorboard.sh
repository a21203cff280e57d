#!/bin/sh
# Install TensorBoard from the wheels the host downloaded (no network here).
#
# usage: aitestbed-install-tensorboard WHEELS REQUIREMENTS DIR
#
# DIR gets every pinned wheel, with --no-deps and their hashes checked (Debian provides
# numpy, requests, setuptools, six and wheel). It is made afresh, then checked by
# importing TensorBoard and torch.utils.tensorboard as a user's python3 would.
set -eu
[ "$#" -eq 3 ] || { echo "usage: $0 WHEELS REQUIREMENTS DIR" >&2; exit 2; }
wheels=$1 requirements=$2 dir=$3
case $dir in /opt/?*) ;; *) echo "$0: refusing to install into '$dir'" >&2; exit 1 ;; esac
rm -rf "$dir"
/usr/bin/python3 -m pip -q --disable-pip-version-check install --root-user-action=ignore --no-index --no-deps \
    --require-hashes --find-links "$wheels" --target "$dir" -r "$requirements"
# pip --target also writes the console scripts into DIR/bin: the role installs its own.
rm -rf "$dir/bin"
chmod -R a+rX,go-w "$dir"
PYTHONPATH="$dir" /usr/bin/python3 -c '
import tensorboard
from tensorboard.main import run_main
from torch.utils.tensorboard import SummaryWriter
assert tensorboard.__version__ == "2.13.0", tensorboard.__version__
' || { echo "$0: the installed TensorBoard does not import" >&2; exit 1; }
echo "installed TensorBoard 2.13.0 in $dir"
