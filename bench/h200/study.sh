#!/usr/bin/env bash
# A recorded study on the H200 machine (see bench/h200/study.md), one phase per call, each under 10 minutes:
#   bash bench/h200/study.sh study   OUT   the agent x arith x 3 seeds with the vllm grader, runs side by side
#   bash bench/h200/study.sh study2  OUT   the same with at most 2 runs on the GPU at once (study3: 3)
#   bash bench/h200/study.sh first   OUT   one run alone: the first submission's latency against the others
#   bash bench/h200/study.sh gsm-hf  OUT   the hf backend on the 1,319-item 8-shot GSM8K-shaped set
#   bash bench/h200/study.sh summary OUT   OUT/summary.md and OUT/summary.json from what the phases left
# STUDY_CPU=1 runs the same phases on a CPU machine (autorl:tiny, the hf backend, a copy-and-submit agent, few
# items; gsm-hf is skipped): the check that the script works before the GPU time is spent.
# Settings: STUDY_SEEDS (default "0 1 2"), STUDY_AGENT (default bench/h200/gpu_agent), STUDY_MODEL (default
# /tmp/vb/model), STUDY_TIMEOUT (default 240), STUDY_SLOTS (runs at once, default 3), STUDY_BACKEND (the grader's
# backend on the GPU, default vllm; hf where vllm is not unpacked).
set -euo pipefail
phase=${1:?usage: study.sh study|first|gsm-hf|summary OUT}
out=$(mkdir -p "${2:?usage: study.sh PHASE OUT}" && cd "$2" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${STUDY_PYTHON:-python3}
autorl() { "$py" -c "from autorl.cli import main; main()" "$@"; }
export AUTORL_HOME=${AUTORL_HOME:-$out/home} PYTHONUNBUFFERED=1
seeds=${STUDY_SEEDS:-0 1 2}
if [ "${STUDY_CPU:-0}" = 1 ]; then
  agent=$out/copy_agent
  mkdir -p "$agent"
  printf '{"name": "copier", "start": "start.sh"}\n' > "$agent/config.yaml"
  cat > "$agent/start.sh" <<'AGENT'
#!/usr/bin/env bash
for v in 1 2 3; do
  cp -rL "$MODEL_PATH" "$OUTPUT_DIR/v$v"
  curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Content-Type: application/json" \
    -H "Authorization: Bearer $AUTORL_TOKEN" -d "{\"model_path\": \"$OUTPUT_DIR/v$v\"}" >> "$WORKSPACE/submits.log"
done
AGENT
  model=autorl:tiny backend=hf gpus=0 timeout=${STUDY_TIMEOUT:-60} limit=', "limit": 8' sandbox=auto
else
  agent=${STUDY_AGENT:-$root/bench/h200/gpu_agent} model=${STUDY_MODEL:-/tmp/vb/model} backend=${STUDY_BACKEND:-vllm} gpus=1
  timeout=${STUDY_TIMEOUT:-240} limit='' sandbox=bwrap
  export VLLM_USE_FLASHINFER_SAMPLER=0
fi
seed_list=$(echo "$seeds" | tr ' ' ',')
case $phase in
  study|study[0-9]|first)
    name=$phase; [ "$phase" = first ] && seed_list=${seed_list%%,*}
    cat > "$out/$name.json" <<SPEC
{"name": "$name", "agent": "$agent", "task": "arith", "model": "$model", "seed": [$seed_list],
 "timeout": $timeout, "backend": "$backend", "gpus": $gpus, "sandbox": "$sandbox", "audit": false$limit}
SPEC
    slots=${STUDY_SLOTS:-3}; [ "$phase" = first ] && slots=1
    case $phase in study[0-9]) slots=${phase#study} ;; esac
    if [ "$gpus" = 0 ]; then where=(--slots "$slots"); else where=(--gpus 0 --option "runs_per_gpu=$slots"); fi
    start=$(date +%s)
    autorl sweep run "$out/$name.json" "${where[@]}" --dir "$out/sweeps/$name" --json > "$out/$name-report.json"
    echo "{\"phase\": \"$phase\", \"wall_s\": $(( $(date +%s) - start ))}" > "$out/$name-wall.json"
    ;;
  gsm-hf)
    if [ "${STUDY_CPU:-0}" = 1 ]; then echo '{"skipped": "STUDY_CPU=1"}' > "$out/gsm-hf.json"; exit 0; fi
    "$py" "$root/bench/warm_engine.py" prepare --out /tmp/we >/dev/null
    PYTHONPATH="$root/src:/tmp/we/site:${PYTHONPATH:-}" "$py" "$root/bench/warm_engine.py" run --out /tmp/we \
      --backend hf --skip arith,mp --gsm-subs 1 --results "$out/gsm-hf.json"
    ;;
  summary)
    "$py" "$root/bench/h200/study_summary.py" "$out"
    ;;
  *) echo "unknown phase $phase: study, first, gsm-hf or summary" >&2; exit 2 ;;
esac
