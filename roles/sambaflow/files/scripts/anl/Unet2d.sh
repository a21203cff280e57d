#! /bin/bash
# Written for the aitestbed emulator of the ALCF AI Testbed (after the ALCF guide).
#
# UNet2d on SN30: compile and train one instance on 4 tiles, or compile a data-parallel
# PEF and run N instances of it with sbatch (unet_batch.sh).
#
# Usage: ./Unet2d.sh {compile,pcompile,run,prun} Image_size Batch_size Number_of_instances [RunID]
#   ./Unet2d.sh compile 256 256 1 unet2d_single_compile
#   ./Unet2d.sh run 256 256 1 unet2d_single_run
#   ./Unet2d.sh pcompile 256 256 8 unet2d_8inst_pcompile
#   ./Unet2d.sh prun 256 256 8 unet2d_8inst_prun
# Output goes to /data/ANL/results/<hostname>/<user>/<RunID>/Unet2d.out; PEFs to
# ./out/Unet2d/unet_train_<BS>_<IM>_{single,NP}_4/.
#
# Environment (defaults as documented): DS (the kaggle_3m dataset), CACHE_DIR,
# RESULTS_DIR (/data/ANL/results), CPUS_PER_TASK (128 / instances), NUM_WORKERS (4),
# EPOCHS (10), ACTIVATE (the app's venv), UNET (the app's directory).
set -e
USER=${USER:-$(id -un)}
usage() {
  echo "Usage: Unet2d.sh {compile,pcompile,run,prun} Image_size Batch_size Number_of_instances [RunID]" >&2
  echo "  e.g. ./Unet2d.sh compile 256 256 1 unet2d_single_compile" >&2
  echo "       ./Unet2d.sh prun 256 256 8 unet2d_8inst_prun" >&2
  if [ -n "$1" ] ; then echo "Unet2d.sh: $1" >&2 ; fi
  exit 1
}
is_count() { case "$1" in ''|*[!0-9]*|0*) return 1 ;; *) return 0 ;; esac ; }

if [ $# -lt 4 ] || [ $# -gt 5 ] ; then
  usage "expected 4 or 5 arguments, got $#"
fi
case "$1" in
  compile|pcompile|run|prun) ;;
  *) usage "unknown command '$1'" ;;
esac
is_count "$2" || usage "Image_size must be a positive integer, not '$2'"
[ $(( $2 % 16 )) -eq 0 ] || usage "Image_size must be a multiple of 16 (valid sizes include 256, 512 and 1024), not '$2'"
is_count "$3" || usage "Batch_size must be a positive integer, not '$3'"
is_count "$4" || usage "Number_of_instances must be a positive integer, not '$4'"
if { [ "$1" == "compile" ] || [ "$1" == "run" ] ; } && [ "$4" != "1" ] ; then
  usage "$1 runs 1 instance (4 tiles, no data parallel): use pcompile/prun for $4 instances"
fi

LOGDIR=$(date +%m%d%y.%H)
if [ "$5" ] ; then
  LOGDIR=$5
fi
MODEL_NAME="Unet2d"
RESULTS_DIR=${RESULTS_DIR:-/data/ANL/results}
OUTPUT_PATH=${RESULTS_DIR}/$(hostname)/${USER}/${LOGDIR}/${MODEL_NAME}.out
echo "Using ${OUTPUT_PATH} for output"
mkdir -p ${RESULTS_DIR}/$(hostname)/${USER}/${LOGDIR}

# Start script timer
SECONDS=0
# PEFs go under the current directory
OUTDIR=$(pwd)/out/${MODEL_NAME}
mkdir -p ${OUTDIR}
BS=$3
NP=$4
NUM_WORKERS=${NUM_WORKERS:-4}
NUM_TILES=4
EPOCHS=${EPOCHS:-10}
DS=${DS:-/software/sambanova/dataset/kaggle_3m}
CACHE_DIR=${CACHE_DIR:-/data/scratch/${USER}/kaggle_3m_${2}}
mkdir -p ${CACHE_DIR} 2>/dev/null || true
export OMP_NUM_THREADS=16
UNET=${UNET:-/opt/sambaflow/apps/image/segmentation/}
ACTIVATE=${ACTIVATE:-/opt/sambaflow/apps/image/segmentation/venv/bin/activate}
if [ -e ${ACTIVATE} ] ; then
  source ${ACTIVATE}
fi

echo "Model: UNET2d" >> ${OUTPUT_PATH} 2>&1
echo "Date: " $(date +%m/%d/%y) >> ${OUTPUT_PATH} 2>&1
echo "Time: " $(date +%H:%M) >> ${OUTPUT_PATH} 2>&1

STATUS=0
if [ "${1}" == "compile" ] ; then
  echo "COMPILE" >> ${OUTPUT_PATH} 2>&1
  rm -f ${OUTDIR}/unet_train_${BS}_${2}_single_${NUM_TILES}/unet_train_${BS}_${2}_single_${NUM_TILES}.pef
  COMMAND="python ${UNET}/compile.py compile --mac-v2 --in-channels=3 --in-width=${2} --in-height=${2} --batch-size=${BS} --enable-conv-tiling --num-tiles=${NUM_TILES} --pef-name=unet_train_${BS}_${2}_single_${NUM_TILES} --output-folder=${OUTDIR}"
elif [ "${1}" == "pcompile" ] ; then
  echo "Parallel compile" >> ${OUTPUT_PATH} 2>&1
  rm -f ${OUTDIR}/unet_train_${BS}_${2}_NP_${NUM_TILES}/unet_train_${BS}_${2}_NP_${NUM_TILES}.pef
  COMMAND="python ${UNET}/compile.py compile --mac-v2 --in-channels=3 --in-width=${2} --in-height=${2} --batch-size=${BS} --enable-conv-tiling --num-tiles=${NUM_TILES} --pef-name=unet_train_${BS}_${2}_NP_${NUM_TILES}  --data-parallel -ws 2 --output-folder=${OUTDIR}"
elif [ "${1}" == "run" ] ; then
  echo "RUN" >> ${OUTPUT_PATH} 2>&1
  COMMAND="srun --nodelist $(hostname) python ${UNET}/hook.py run --data-cache=${CACHE_DIR}  --data-in-memory --num-workers=${NUM_WORKERS} --enable-tiling  --min-throughput 395 --in-channels=3 --in-width=${2} --in-height=${2} --init-features 32 --batch-size=${BS} --epochs ${EPOCHS} --data-dir ${DS} --log-dir log_dir_unet_${2}_${BS}_single_${NUM_TILES} --pef=${OUTDIR}/unet_train_${BS}_${2}_single_${NUM_TILES}/unet_train_${BS}_${2}_single_${NUM_TILES}.pef"
elif [ "${1}" == "prun" ] ; then
  echo "PRUN" >> ${OUTPUT_PATH} 2>&1
  echo "NP=${NP}" >> ${OUTPUT_PATH} 2>&1
  cpus=${CPUS_PER_TASK:-$((128/NP))}
  [ ${cpus} -ge 1 ] || cpus=1
  SBATCH=$(command -v sbatch || echo /usr/local/bin/sbatch)
  COMMAND="${SBATCH} --gres=rdu:1 --tasks-per-node ${NP} --nodes 1 --nodelist $(hostname) --cpus-per-task=${cpus} $(pwd)/unet_batch.sh ${NP} ${NUM_WORKERS} ${BS} ${2} ${LOGDIR}"
  if [ ! -e $(pwd)/unet_batch.sh ] ; then
    echo "Unet2d.sh: $(pwd)/unet_batch.sh not found: copy unet_batch.sh next to Unet2d.sh" | tee -a ${OUTPUT_PATH} >&2
    exit 1
  fi
fi
echo $COMMAND >> ${OUTPUT_PATH} 2>&1
eval $COMMAND >> ${OUTPUT_PATH} 2>&1 || STATUS=$?
echo "Duration: " $SECONDS >> ${OUTPUT_PATH} 2>&1
if [ ${STATUS} -ne 0 ] ; then
  echo "Unet2d.sh: ${1} failed (exit status ${STATUS}): see ${OUTPUT_PATH}" >&2
fi
exit ${STATUS}
