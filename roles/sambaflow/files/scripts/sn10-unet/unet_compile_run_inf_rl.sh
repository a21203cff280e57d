#! /bin/bash -x
# Written for the aitestbed emulator of the ALCF AI Testbed (after the ALCF guide).
#
# UNet on SN10, one RDU: compile, test (CPU against RDU) or train.
# Usage: unet_compile_run_inf_rl.sh {compile,test,run} <image size> <batch size>
#   export OUTDIR=~/apps/image/unet
#   export DATADIR=/software/sambanova/dataset/kaggle_3m
#   sbatch unet_compile_run_inf_rl.sh compile 32 1   # then: test 32 1, run 32 1
# PEFs go to ${OUTDIR}/out/unet_train_<BS>_<IM>/; EPOCHS (default 2) sets the run's epochs.
set -e
SECONDS=0
if [ $# -ne 3 ] || ! [[ "$1" =~ ^(compile|test|run)$ ]] \
    || ! [[ "$2" =~ ^[1-9][0-9]*$ && "$3" =~ ^[1-9][0-9]*$ ]] ; then
  set +x
  echo "Usage: unet_compile_run_inf_rl.sh {compile,test,run} <image size> <batch size>" >&2
  echo "  e.g. sbatch unet_compile_run_inf_rl.sh compile 32 1" >&2
  exit 1
fi
BS=$3
export OMP_NUM_THREADS=8
OUTDIR=${OUTDIR:-$(pwd)}
DATADIR=${DATADIR:-/software/sambanova/dataset/kaggle_3m}
EPOCHS=${EPOCHS:-2}

source /opt/sambaflow/venv/bin/activate
UNET=${UNET:-/opt/sambaflow/apps/image/unet}
PEF_NAME=unet_train_${BS}_${2}
mkdir -p ${OUTDIR}/out

echo "Model: UNET_TRAIN"
echo "Date: " $(date +%m/%d/%y)
echo "Time: " $(date +%H:%M)
echo "Machine: " $(hostname)
if [ "${1}" == "compile" ] ; then
  echo "COMPILE"
  python ${UNET}/unet.py compile -b ${BS} --in-channels=3 --in-width=${2} --in-height=${2} --enable-conv-tiling --mac-v2 --compiler-configs-file ${UNET}/jsons/compiler_configs/unet_compiler_configs_no_inst.json --pef-name="${PEF_NAME}" --output-folder=${OUTDIR}/out
elif [ "${1}" == "test" ] ; then
  echo "TEST"
  python ${UNET}/unet.py test --in-channels=3 --in-width=${2} --in-height=${2} --init-features 32 --batch-size=${BS} --pef="${OUTDIR}/out/${PEF_NAME}/${PEF_NAME}.pef"
elif [ "${1}" == "run" ] ; then
  echo "RUN"
  python ${UNET}/unet_hook.py run --num-workers=3 --do-train --in-channels=3 --in-width=${2} --in-height=${2} --init-features 32 --batch-size=${BS} --epochs ${EPOCHS} --data-dir ${DATADIR} --log-dir ${OUTDIR}/log_dir_unet_${2}_${BS}_single --pef="${OUTDIR}/out/${PEF_NAME}/${PEF_NAME}.pef"
fi
echo "Duration: " $SECONDS
