#! /bin/bash -x
# Written for the aitestbed emulator of the ALCF AI Testbed (after the ALCF guide).
set -e
#
# Usage: ./unet_all.sh 256 256
#
# Compiles UNet for data parallel (once) and submits unet_batch.sh to run it on
# 8 RDUs of each of the 2 SN10 nodes. Run it from ~/apps/image (a copy of
# /opt/sambaflow/apps/image, so that ./unet is the app).
# Environment (defaults as documented): TASKS_PER_NODE (8), NODES (2),
# NODELIST (sm-02,sm-01), CPUS_PER_TASK (16).
SECONDS=0
if [ $# -ne 2 ] || ! [[ "$1" =~ ^[1-9][0-9]*$ && "$2" =~ ^[1-9][0-9]*$ ]] ; then
  set +x
  echo "Usage: ./unet_all.sh <image size> <batch size>     e.g. ./unet_all.sh 256 256" >&2
  exit 1
fi

# IMage size.
IM=${1}
# Batch Size
BS=${2}
NUM_WORKERS=1
export OMP_NUM_THREADS=16

source /opt/sambaflow/venv/bin/activate
UNET=$(pwd)/unet
if [ ! -e ${UNET}/unet.py ] ; then
  set +x
  echo "unet_all.sh: ${UNET}/unet.py not found: run from ~/apps/image (cp -r /opt/sambaflow/apps/image ~/apps/image)" >&2
  exit 1
fi

echo "Model: UNET"
echo "Date: " $(date +%m/%d/%y)
echo "Time: " $(date +%H:%M)

echo "COMPILE"

# Compile for parallel RDUs
if [ ! -e out/unet_train_${BS}_${IM}_NN/unet_train_${BS}_${IM}_NN.pef ] ; then
  python ${UNET}/unet.py compile -b ${BS} --in-channels=3 --in-width=${IM} --in-height=${IM} --enable-conv-tiling --mac-v2 --compiler-configs-file ${UNET}/jsons/compiler_configs/unet_compiler_configs_no_inst.json --pef-name="unet_train_${BS}_${IM}_NN"  --data-parallel -ws 2 > compile_${BS}_${IM}_NN.log 2>&1
fi

# Run Multi-Node, Data Parallel
NN=${NODES:-2}
echo "RUN"
echo "NN=${NN}"
sbatch --gres=rdu:1 --tasks-per-node ${TASKS_PER_NODE:-8}  --nodes ${NN} --nodelist ${NODELIST:-sm-02,sm-01} --cpus-per-task=${CPUS_PER_TASK:-16} ./unet_batch.sh ${NN} ${NUM_WORKERS} ${BS} ${IM}
echo "Duration: " $SECONDS
