#! /bin/bash
# Written for the aitestbed emulator of the ALCF AI Testbed (after the ALCF guide).
#
# Run N data-parallel UNet2d instances; Unet2d.sh prun submits it:
#   sbatch --gres=rdu:1 --tasks-per-node ${NP} --nodes 1 --nodelist $(hostname) \
#          --cpus-per-task=${cpus} $(pwd)/unet_batch.sh ${NP} ${NUM_WORKERS} ${BS} ${IM} ${RunID}
# Usage: unet_batch.sh Number_of_instances Num_workers Batch_size Image_size [RunID]
# Output is appended to /data/ANL/results/<hostname>/<user>/<RunID>/Unet2d.out; the PEF is
# read from ./out/Unet2d/unet_train_<BS>_<IM>_NP_4/ (the directory sbatch ran in).
set -e
USER=${USER:-$(id -un)}
usage() {
  echo "Usage: unet_batch.sh Number_of_instances Num_workers Batch_size Image_size [RunID]" >&2
  echo "  (submitted by ./Unet2d.sh prun <image size> <batch size> <instances> <RunID>)" >&2
  if [ -n "$1" ] ; then echo "unet_batch.sh: $1" >&2 ; fi
  exit 1
}
is_count() { case "$1" in ''|*[!0-9]*|0*) return 1 ;; *) return 0 ;; esac ; }
if [ $# -lt 4 ] || [ $# -gt 5 ] ; then
  usage "expected 4 or 5 arguments, got $#"
fi
for value in "$1" "$2" "$3" "$4" ; do
  is_count "${value}" || [ "${value}" == "0" ] || usage "'${value}' is not a number"
done

NP=$1
NUM_WORKERS=$2
BS=$3
IM=$4
LOGDIR=$(date +%m%d%y.%H)
if [ "$5" ] ; then
  LOGDIR=$5
fi
MODEL_NAME="Unet2d"
RESULTS_DIR=${RESULTS_DIR:-/data/ANL/results}
OUTPUT_PATH=${RESULTS_DIR}/$(hostname)/${USER}/${LOGDIR}/${MODEL_NAME}.out
echo "Using ${OUTPUT_PATH} for output"
mkdir -p ${RESULTS_DIR}/$(hostname)/${USER}/${LOGDIR}

SECONDS=0
OUTDIR=$(pwd)/out/${MODEL_NAME}
EPOCHS=${EPOCHS:-10}
DS=${DS:-/software/sambanova/dataset/kaggle_3m}
CACHE_DIR=${CACHE_DIR:-/data/scratch/${USER}/kaggle_3m_${IM}}
mkdir -p ${CACHE_DIR} 2>/dev/null || true
export OMP_NUM_THREADS=16
export SAMBA_CCL_USE_PCIE_TRANSPORT=0
ACTIVATE=${ACTIVATE:-/opt/sambaflow/apps/image/segmentation/venv/bin/activate}
if [ -e ${ACTIVATE} ] ; then
  source ${ACTIVATE}
fi
UNET=${UNET:-/opt/sambaflow/apps/image/segmentation/}
SRUN=$(command -v srun || echo /usr/local/bin/srun)

echo "Model: UNET2d_TRAIN" >> ${OUTPUT_PATH} 2>&1
echo "Date: " $(date +%m/%d/%y) >> ${OUTPUT_PATH} 2>&1
echo "Time: " $(date +%H:%M) >> ${OUTPUT_PATH} 2>&1
echo "NP=${NP} on ${SLURM_JOB_NODELIST:-$(hostname)}" >> ${OUTPUT_PATH} 2>&1

COMMAND="${SRUN} --mpi=pmi2 python ${UNET}/hook.py run --data-cache=${CACHE_DIR}  --data-in-memory --num-workers=${NUM_WORKERS} --enable-tiling  --min-throughput 395 --in-channels=3 --in-width=${IM} --in-height=${IM} --init-features 32 --batch-size=${BS} --epochs ${EPOCHS} --data-dir ${DS} --log-dir log_dir_unet_${IM}_${BS}_${NP} --data-parallel --reduce-on-rdu --pef=${OUTDIR}/unet_train_${BS}_${IM}_NP_4/unet_train_${BS}_${IM}_NP_4.pef"
echo $COMMAND >> ${OUTPUT_PATH} 2>&1
STATUS=0
eval $COMMAND >> ${OUTPUT_PATH} 2>&1 || STATUS=$?
echo "Duration: " $SECONDS >> ${OUTPUT_PATH} 2>&1
exit ${STATUS}
