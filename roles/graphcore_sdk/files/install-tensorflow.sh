#!/bin/sh
# Install TensorFlow for the IPU from the wheels the host downloaded (no network here).
#
# usage: install-tensorflow.sh PIP_PYTHON WHEELS REQUIREMENTS TF_DIR KERAS_DIR
#
# TF_DIR gets tensorflow-cpu and every requirement but keras (with --no-deps: Debian
# provides numpy, six, packaging, typing_extensions, requests, astunparse); KERAS_DIR gets
# keras. TensorFlow's C++ headers (for building custom ops, 170 MB) are left out.
# The role then copies our tensorflow.python.ipu into TF_DIR's tensorflow/python/ipu.
# Both directories are made afresh, then checked by importing them as a venv would.
set -eu
[ "$#" -eq 5 ] || { echo "usage: $0 PIP_PYTHON WHEELS REQUIREMENTS TF_DIR KERAS_DIR" >&2; exit 2; }
python=$1 wheels=$2 requirements=$3 tf_dir=$4 keras_dir=$5
for dir in "$tf_dir" "$keras_dir"; do
    case $dir in /opt/graphcore/?*) ;; *) echo "$0: refusing to install into '$dir'" >&2; exit 1 ;; esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grep -v '^keras==' "$requirements" > "$work/tensorflow.txt"
grep -E '^(#|keras==)' "$requirements" > "$work/keras.txt"
rm -rf "$tf_dir" "$keras_dir"
pip() { "$python" -m pip -q --disable-pip-version-check install --no-index --no-deps \
        --require-hashes --find-links "$wheels" "$@"; }
pip --target "$tf_dir" -r "$work/tensorflow.txt"
pip --target "$keras_dir" -r "$work/keras.txt"
rm -rf "$tf_dir/tensorflow/include"
chmod -R a+rX,go-w "$tf_dir" "$keras_dir"
PYTHONPATH="$tf_dir:$keras_dir" TF_CPP_MIN_LOG_LEVEL=3 /usr/bin/python3 -c '
import tensorflow as tf, keras, tensorboard
assert tf.__version__ == "2.13.1", tf.__version__
from tensorflow import keras as tf_keras
tf_keras.Sequential([tf_keras.layers.Dense(2)])
' || { echo "$0: the installed TensorFlow does not import" >&2; exit 1; }
echo "installed TensorFlow 2.13.1 in $tf_dir, Keras in $keras_dir"
