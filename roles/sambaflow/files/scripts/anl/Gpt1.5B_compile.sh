#! /bin/bash
# Written for the aitestbed emulator of the ALCF AI Testbed (after the ALCF guide).
#
# GPT 1.5B data parallel on SN30: compile a PEF for data-parallel runs (once), then
# submit Gpt1.5B_run.sh: 32 instances of 4 tiles over 2 nodes, 16 per node.
# Usage: ./Gpt1.5B_compile.sh [RunID]
# Output goes to /data/ANL/results/<hostname>/<user>/<RunID>/GPT1.5B.out (RunID: the
# argument, or the date and hour, %m%d%y.%H); the PEF to /data/scratch/<user>/GPT_RUN.
# The run's Slurm log is ~/slurm-<jobid>.out; it names the run's own output file.
#
# Environment (defaults as documented): GPT_NTASKS (32), GPT_NTASKS_PER_NODE (16),
# GPT_NODES (2), CPUS_PER_TASK (8), OUTDIR, RESULTS_DIR, ACTIVATE; the run also
# reads STEPS_THIS_RUN (800) and DATA_DIR (/data/ANL/ss1024).
set -e
USER=${USER:-$(id -un)}
if [ $# -gt 1 ] || [[ "$1" == -* ]] ; then
  echo "Usage: Gpt1.5B_compile.sh [RunID]" >&2
  echo "  compiles GPT 1.5B for data parallel (if needed) and submits Gpt1.5B_run.sh" >&2
  exit 1
fi
APP=${GPT_APP:-/opt/sambaflow/apps/nlp/transformers_on_rdu}
ACTIVATE=${ACTIVATE:-${APP}/venv/bin/activate}
LOGDIR=$(date +%m%d%y.%H)
if [ "$1" ] ; then
  LOGDIR=$1
fi
MODEL_NAME="GPT1.5B"
RESULTS_DIR=${RESULTS_DIR:-/data/ANL/results}
OUTPUT_PATH=${RESULTS_DIR}/$(hostname)/${USER}/${LOGDIR}/${MODEL_NAME}.out
echo "Using ${OUTPUT_PATH} for output"
mkdir -p ${RESULTS_DIR}/$(hostname)/${USER}/${LOGDIR}

export OMP_NUM_THREADS=18
SECONDS=0
OUTDIR=${OUTDIR:-/data/scratch/${USER}/GPT_RUN}
export OUTDIR
mkdir -p ${OUTDIR}
if [ -e ${ACTIVATE} ] ; then
  source ${ACTIVATE}
fi
# Gpt1.5B_run.sh: beside this script when not in the current directory.
RUN_SCRIPT=Gpt1.5B_run.sh
if [ ! -e ${RUN_SCRIPT} ] ; then
  RUN_SCRIPT=$(cd "$(dirname "$0")" && pwd)/Gpt1.5B_run.sh
fi
if [ ! -e ${RUN_SCRIPT} ] ; then
  echo "Gpt1.5B_compile.sh: Gpt1.5B_run.sh not found: copy it next to Gpt1.5B_compile.sh" >&2
  exit 1
fi
echo "Model: " ${MODEL_NAME} > ${OUTPUT_PATH} 2>&1
echo "Date: " $(date +%m/%d/%y) >> ${OUTPUT_PATH} 2>&1
echo "Time: " $(date +%H:%M) >> ${OUTPUT_PATH} 2>&1
STATUS=0
if [ ! -e ${OUTDIR}/gpt15/gpt15.pef ] ; then
  echo "COMPILE START AT ${SECONDS}" >> ${OUTPUT_PATH} 2>&1
  COMMAND="python ${APP}/transformers_hook.py compile --module_name gpt2_pretrain --task_name clm --max_seq_length 1024 -b 16 --output_dir=${OUTDIR}/hf_output --overwrite_output_dir --do_train  --per_device_train_batch_size 16 --cache ${OUTDIR}/cache/ --tokenizer_name gpt2 --model_name gpt2 --mac-v2 --non_split_head --mac-human-decision ${APP}/human_decisions_gm/mac_v2_overrides/gpt2_48_enc_full_recompute_training_spatialmapping_tiling16_clmerge_gm_nonpardp_lnsd.json --compiler-configs-file ${APP}/human_decisions_gm/compiler_configs/compiler_configs_gpt2_sc_recompute_spatialmapping_tiling16_clsmerge_withcls_nonpardp_norc_e2e.json --skip_broadcast_patch --config_name ${APP}/customer_specific/mv/configs/gpt2_config_xl_50260.json --no_index_select_patch --data-parallel -ws 2 --weight_decay 0.1  --max_grad_norm_clip 1.0 --num-tiles 4 --pef-name=gpt15 --output-folder=${OUTDIR}"
  echo "COMPILE COMMAND: $COMMAND" >> ${OUTPUT_PATH} 2>&1
  eval $COMMAND >> ${OUTPUT_PATH} 2>&1 || STATUS=$?
  echo "COMPILE END AT ${SECONDS}" >> ${OUTPUT_PATH} 2>&1
fi
if [ ${STATUS} -eq 0 ] ; then
  echo "RUN" >> ${OUTPUT_PATH} 2>&1
  SBATCH=/usr/local/bin/sbatch
  [ -x ${SBATCH} ] || SBATCH=$(command -v sbatch || echo sbatch)
  COMMAND="${SBATCH} --output=${HOME}/slurm-%A.out --ntasks ${GPT_NTASKS:-32} --gres=rdu:1 --ntasks-per-node ${GPT_NTASKS_PER_NODE:-16}  --nodes ${GPT_NODES:-2} --cpus-per-task=${CPUS_PER_TASK:-8}  ${RUN_SCRIPT} ${1}"
  echo "RUN COMMAND: $COMMAND" >> ${OUTPUT_PATH} 2>&1
  eval $COMMAND >> ${OUTPUT_PATH} 2>&1 || STATUS=$?
fi
echo "Duration: " $SECONDS >> ${OUTPUT_PATH} 2>&1
if [ ${STATUS} -ne 0 ] ; then
  echo "Gpt1.5B_compile.sh: failed (exit status ${STATUS}): see ${OUTPUT_PATH}" >&2
fi
exit ${STATUS}
