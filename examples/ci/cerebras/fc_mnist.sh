#!/bin/bash
# fc_mnist of the Cerebras modelzoo (Release 2.1.1) on the CS-2 appliance: a short
# training run, `python run.py CSX ... --max_steps 50` (FC_MNIST_STEPS to change it).
#
# Runs with bash on a Cerebras login node, not under sbatch: run.py submits the compile
# and execute wsjobs to the appliance itself. The guide's venv and modelzoo are made in
# ~/R_2.1.1 the first time and reused after. The params, the model_dir and the log stay
# in this job's directory.
set -euo pipefail

RELEASE=$HOME/R_2.1.1
VENV=$RELEASE/venv_cerebras_pt
MODELZOO=$RELEASE/modelzoo
FC_MNIST=$MODELZOO/modelzoo/fc_mnist/pytorch
DATA=/software/cerebras/dataset/fc_mnist/data/mnist/train
STEPS=${FC_MNIST_STEPS:-50}

# The appliance's workers run as another user and read this job's files: the home and
# the directories down to here must be navigable (the guide's `chmod a+xr ~/`).
chmod a+xr "$HOME"
case $PWD/ in
  "$HOME"/*)
    dir=$PWD
    while [ "$dir" != "$HOME" ]; do chmod a+rx "$dir"; dir=$(dirname "$dir"); done ;;
esac

mkdir -p "$RELEASE"
chmod a+x "$RELEASE"
if ! "$VENV/bin/python" -c 'import cerebras_pytorch' 2>/dev/null; then
  echo "making the venv $VENV (once)"
  rm -rf "$VENV"
  /software/cerebras/python3.8/bin/python3.8 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q cerebras_pytorch==2.1.1
fi
if [ ! -f "$FC_MNIST/run.py" ]; then
  echo "cloning the modelzoo into $MODELZOO (once)"
  rm -rf "$MODELZOO"
  git clone -q https://github.com/Cerebras/modelzoo.git "$MODELZOO"
  git -C "$MODELZOO" checkout -q Release_2.1.1
  "$VENV/bin/pip" install -q -r "$MODELZOO/requirements.txt"
fi

# The repository's params with the data set of the login nodes.
sed "s|data_dir: \"./mnist\"|data_dir: \"$DATA\"|" "$FC_MNIST/configs/params.yaml" > params.yaml
rm -rf model_dir
set +u  # activate reads variables that may be unset
# shellcheck disable=SC1091  # made above
source "$VENV/bin/activate"
set -u
python "$FC_MNIST/run.py" CSX --job_labels name=ci_fc_mnist --params params.yaml \
  --num_csx=1 --mode train --model_dir model_dir --mount_dirs /home/ /software \
  --python_paths "$MODELZOO" --compile_dir "/$(whoami)" --max_steps "$STEPS" 2>&1 |
  tee fc_mnist.log
ls model_dir
