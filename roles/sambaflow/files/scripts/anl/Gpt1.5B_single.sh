#! /bin/bash
# Written for the aitestbed emulator of the ALCF AI Testbed (after the ALCF guide).
#
# GPT 1.5B on SN30, one instance on 4 tiles, batch 16: compile (once) and train 100 steps.
# Usage: ./Gpt1.5B_single.sh [RunID]
# Output goes to /data/ANL/results/<hostname>/<user>/<RunID>/GPT1.5B.out (RunID: the
# argument, or the date and hour, %m%d%y.%H); the PEF and the run's files to
# /data/scratch/<user>/GPT_RUN.
#
# Environment (defaults as documented): OUTDIR, RESULTS_DIR (/data/ANL/results),
# DATA_DIR (/data/ANL/ss1024), STEPS_THIS_RUN (100), ACTIVATE (the app venv), GPT_APP.
set -e
USER=${USER:-$(id -un)}
if [ $# -gt 1 ] || [[ "$1" == -* ]] ; then
  echo "Usage: Gpt1.5B_single.sh [RunID]" >&2
  echo "  compiles (if needed) and trains GPT 1.5B for 100 steps on 4 tiles; output in" >&2
  echo "  /data/ANL/results/$(hostname)/${USER}/<RunID>/GPT1.5B.out" >&2
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
DATA_DIR=${DATA_DIR:-/data/ANL/ss1024}
STEPS_THIS_RUN=${STEPS_THIS_RUN:-100}
mkdir -p ${OUTDIR}
if [ -e ${ACTIVATE} ] ; then
  source ${ACTIVATE}
fi
echo "Model: " ${MODEL_NAME} > ${OUTPUT_PATH} 2>&1
echo "Date: " $(date +%m/%d/%y) >> ${OUTPUT_PATH} 2>&1
echo "Time: " $(date +%H:%M) >> ${OUTPUT_PATH} 2>&1
cd ${OUTDIR}
STATUS=0
if [ ! -e ${OUTDIR}/gpt15_single/gpt15_single.pef ] ; then
  echo "COMPILE START AT ${SECONDS}" >> ${OUTPUT_PATH} 2>&1
  COMMAND="python ${APP}/transformers_hook.py compile --module_name gpt2_pretrain --task_name clm --max_seq_length 1024 -b 16 --output_dir=${OUTDIR}/hf_output --overwrite_output_dir --do_train  --per_device_train_batch_size 16 --cache ${OUTDIR}/cache/ --tokenizer_name gpt2 --model_name gpt2 --mac-v2 --non_split_head --mac-human-decision ${APP}/human_decisions_gm/mac_v2_overrides/gpt2_48_enc_full_recompute_training_spatialmapping_tiling16_clmerge_gm_nonpardp_lnsd.json --compiler-configs-file ${APP}/human_decisions_gm/compiler_configs/compiler_configs_gpt2_sc_recompute_spatialmapping_tiling16_clsmerge_withcls_nonpardp_norc_e2e.json --skip_broadcast_patch --config_name ${APP}/customer_specific/mv/configs/gpt2_config_xl_50260.json --no_index_select_patch --weight_decay 0.1  --max_grad_norm_clip 1.0 --num-tiles 4 --pef-name=gpt15_single --output-folder=${OUTDIR}"
  echo "COMPILE COMMAND: $COMMAND" >> ${OUTPUT_PATH} 2>&1
  eval $COMMAND >> ${OUTPUT_PATH} 2>&1 || STATUS=$?
  echo "COMPILE END AT ${SECONDS}" >> ${OUTPUT_PATH} 2>&1
fi
if [ ${STATUS} -eq 0 ] ; then
  echo "RUN" >> ${OUTPUT_PATH} 2>&1
  SRUN=$(command -v srun || echo /usr/local/bin/srun)
  COMMAND="${SRUN} python ${APP}/transformers_hook.py run  -b 16  --module_name gpt2_pretrain --task_name clm --max_seq_length 1024  --overwrite_output_dir --do_train  --per_device_train_batch_size 16 --cache ${OUTDIR}/cache/  --tokenizer_name gpt2 --model_name gpt2 --non_split_head --skip_broadcast_patch --no_index_select_patch --output_dir=${OUTDIR}/hf_output --config_name ${APP}/customer_specific/mv/configs/gpt2_config_xl_50260.json --max_grad_norm_clip 1.0 --skip_checkpoint --data_dir ${DATA_DIR} --logging_steps 1 --max_steps 900000 --learning_rate 0.00025 --steps_this_run ${STEPS_THIS_RUN} --pef=${OUTDIR}/gpt15_single/gpt15_single.pef"
  echo "RUN COMMAND: $COMMAND" >> ${OUTPUT_PATH} 2>&1
  eval $COMMAND >> ${OUTPUT_PATH} 2>&1 || STATUS=$?
fi
echo "Duration: " $SECONDS >> ${OUTPUT_PATH} 2>&1
if [ ${STATUS} -ne 0 ] ; then
  echo "Gpt1.5B_single.sh: failed (exit status ${STATUS}): see ${OUTPUT_PATH}" >&2
fi
exit ${STATUS}
