#! /bin/bash -x
# Written for the aitestbed emulator of the ALCF AI Testbed (after the ALCF guide).
set -e
#
# Usage: ./unet_batch.sh 2 1
#
# Submitted by unet_all.sh: runs the data-parallel UNet on every task of the job.
# Arguments: number of nodes, data loader workers, and (unet_all.sh passes them)
# batch size and image size, 256 and 256 by default.
SECONDS=0
if [ $# -lt 2 ] || [ $# -gt 4 ] ; then
  set +x
  echo "Usage: ./unet_batch.sh <nodes> <workers> [<batch size> <image size>]   e.g. sbatch ... ./unet_batch.sh 2 1" >&2
  exit 1
fi
for value in "$@" ; do
  if ! [[ "${value}" =~ ^[0-9]+$ ]] ; then
    set +x
    echo "unet_batch.sh: '${value}' is not a number" >&2
    exit 1
  fi
done

# Batch Size
BS=${3:-256}

# IMage size
IM=${4:-256}
NN=${1}
NUM_WORKERS=${2}
export OMP_NUM_THREADS=16
DATADIR=${DATADIR:-/software/sambanova/dataset/kaggle_3m}
UNET=$(pwd)/unet
export SAMBA_CCL_USE_PCIE_TRANSPORT=0

source /opt/sambaflow/venv/bin/activate

echo "Model: UNET_TRAIN"
echo "Date: " $(date +%m/%d/%y)
echo "Time: " $(date +%H:%M)

srun --mpi=pmi2 python ${UNET}/unet_hook.py  run --do-train --in-channels=3 --in-width=${IM} --in-height=${IM} --init-features 32 --batch-size=${BS} --epochs ${EPOCHS:-2}   --data-dir ${DATADIR} --log-dir log_dir_unet_${NN}_train_kaggle --pef=$(pwd)/out/unet_train_${BS}_${IM}_NN/unet_train_${BS}_${IM}_NN.pef --data-parallel --reduce-on-rdu --num-workers=${NUM_WORKERS}

echo "Duration: " $SECONDS
