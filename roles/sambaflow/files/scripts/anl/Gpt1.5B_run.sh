#! /bin/bash
# Written for the aitestbed emulator of the ALCF AI Testbed (after the ALCF guide).
#
# GPT 1.5B data parallel on SN30: run every instance of the job (Gpt1.5B_compile.sh
# submits this with sbatch --ntasks 32 --gres=rdu:1 --ntasks-per-node 16 --nodes 2).
# Usage: sbatch ... Gpt1.5B_run.sh [RunID]
# Output goes to /data/ANL/results/<hostname>/<user>/<RunID>/Gpt1.5B.out.
#
# Environment: STEPS_THIS_RUN (800), DATA_DIR (/data/ANL/ss1024), OUTDIR, RESULTS_DIR,
# ACTIVATE.
set -e
USER=${USER:-$(id -un)}
if [ $# -gt 1 ] || [[ "$1" == -* ]] ; then
  echo "Usage: Gpt1.5B_run.sh [RunID]   (submitted by Gpt1.5B_compile.sh with sbatch)" >&2
  exit 1
fi
APP=${GPT_APP:-/opt/sambaflow/apps/nlp/transformers_on_rdu}
ACTIVATE=${ACTIVATE:-${APP}/venv/bin/activate}
LOGDIR=$(date +%m%d%y.%H)
if [ "$1" ] ; then
  LOGDIR=$1
fi
MODEL_NAME="Gpt1.5B"
RESULTS_DIR=${RESULTS_DIR:-/data/ANL/results}
OUTPUT_PATH=${RESULTS_DIR}/$(hostname)/${USER}/${LOGDIR}/${MODEL_NAME}.out
echo "Using ${OUTPUT_PATH} for output"
mkdir -p ${RESULTS_DIR}/$(hostname)/${USER}/${LOGDIR}

export OMP_NUM_THREADS=18
SECONDS=0
OUTDIR=${OUTDIR:-/data/scratch/${USER}/GPT_RUN}
DATA_DIR=${DATA_DIR:-/data/ANL/ss1024}
STEPS_THIS_RUN=${STEPS_THIS_RUN:-800}
if [ -e ${ACTIVATE} ] ; then
  source ${ACTIVATE}
fi
echo "Model: " ${MODEL_NAME} >> ${OUTPUT_PATH} 2>&1
echo "Date: " $(date +%m/%d/%y) >> ${OUTPUT_PATH} 2>&1
echo "Time: " $(date +%H:%M) >> ${OUTPUT_PATH} 2>&1
echo "Nodes: " ${SLURM_JOB_NODELIST:-$(hostname)} >> ${OUTPUT_PATH} 2>&1
if [ ! -e ${OUTDIR}/gpt15/gpt15.pef ] ; then
  echo "PEF ${OUTDIR}/gpt15/gpt15.pef does not exist: run Gpt1.5B_compile.sh first" | tee -a ${OUTPUT_PATH} >&2
  exit 1
fi
cd ${OUTDIR}
echo "RUN" >> ${OUTPUT_PATH} 2>&1
SRUN=/usr/local/bin/srun
[ -x ${SRUN} ] || SRUN=$(command -v srun || echo srun)
COMMAND="${SRUN} --mpi=pmi2 python ${APP}/transformers_hook.py run  -b 16  --module_name gpt2_pretrain --task_name clm --max_seq_length 1024  --overwrite_output_dir --do_train  --per_device_train_batch_size 16 --cache ${OUTDIR}/cache/  --tokenizer_name gpt2 --model_name gpt2 --non_split_head --skip_broadcast_patch --no_index_select_patch --output_dir=${OUTDIR}/hf_output --config_name ${APP}/customer_specific/mv/configs/gpt2_config_xl_50260.json --max_grad_norm_clip 1.0 --skip_checkpoint --data-parallel --reduce-on-rdu --data_dir ${DATA_DIR} --data_dir ${DATA_DIR}  --logging_steps 1 --max_steps 900000 --learning_rate 0.00025 --steps_this_run ${STEPS_THIS_RUN} --min_throughput 299000 --max_throughput 600000 --pef=${OUTDIR}/gpt15/gpt15.pef"
echo "RUN COMMAND: $COMMAND" >> ${OUTPUT_PATH} 2>&1
STATUS=0
eval $COMMAND >> ${OUTPUT_PATH} 2>&1 || STATUS=$?
echo "Duration: " $SECONDS >> ${OUTPUT_PATH} 2>&1
exit ${STATUS}
