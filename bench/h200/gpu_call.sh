#!/usr/bin/env bash
# One call on the GPU machine for the recorded study: gpu_call.sh PHASE OUT (PHASE as in study.sh: study, first,
# gsm-hf; or setup alone). The first call after bench/h200/unpack.sh sets the machine up: the carried .whl/
# (uvicorn, starlette, httpx-sse: wheels the image lacks) into /tmp/site2, .bw/ (bwrap and its libraries, run through bwrap-run) for the sandbox, and the
# random-initialised 1.5B model at /tmp/vb/model. Phases write to /tmp/study (AUTORL_HOME /tmp/study/home, shared
# by the phases, so the `first` phase finds the study's baseline cached: the case where no engine was warm);
# OUT gets the summary and the small files (records, logs), never the checkpoints.
set -uo pipefail
phase=${1:?usage: gpu_call.sh setup|study|first|gsm-hf OUT}
out=${2:?usage: gpu_call.sh PHASE OUT}
root=$(cd "$(dirname "$0")/../.." && pwd)
[ -d /tmp/site2/uvicorn ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site2 "$root"/.whl/*.whl
export PYTHONPATH="$root/src:/tmp/site:/tmp/site2" VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
export AUTORL_BWRAP="$root/.bw/bwrap-run" AUTORL_HOME=/tmp/study/home
[ -f /tmp/vb/model/config.json ] || python3 "$root/bench/vllm_vs_hf.py" prepare --out /tmp/vb > "$out/prepare.log" 2>&1
mkdir -p /tmp/study
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv -l 5 > "$out/smi-$phase.log" 2>&1 &
smi=$!
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader -l 5 > "$out/smi-apps-$phase.log" 2>&1 &
apps=$!
start=$(date +%s)
if [ "$phase" != setup ]; then
  bash "$root/bench/h200/study.sh" "$phase" /tmp/study > "$out/$phase.log" 2>&1
  echo "study.sh $phase: exit $? after $(( $(date +%s) - start )) s" >> "$out/$phase.log"
fi
kill $smi $apps 2>/dev/null
# the disk the phase left: its study folder, the scratch homes, the free space
python3 - "$phase" > "/tmp/study/disk-$phase.json" <<'PY'
import json, os, shutil, sys
def du(p):
    return sum(os.lstat(os.path.join(d, f)).st_blocks * 512 for d, _, fs in os.walk(p) for f in fs)
phase = sys.argv[1]
study = f"/tmp/study/sweeps/{phase}"
scratch = [os.path.join("/tmp", d) for d in os.listdir("/tmp") if d.startswith("autorl-sweep-")]
print(json.dumps({"study_gib": round(du(study) / 2**30, 2) if os.path.isdir(study) else None,
                  "scratch_gib": round(sum(du(p) for p in scratch) / 2**30, 2),
                  "free_gib": round(shutil.disk_usage("/tmp").free / 2**30, 1)}))
PY
cp /tmp/study/disk-$phase.json "$out/" 2>/dev/null
cp "$out"/smi-*.log /tmp/study/ 2>/dev/null
python3 "$root/bench/h200/study_summary.py" /tmp/study 2>> "$out/$phase.log"
cp /tmp/study/summary.md /tmp/study/summary.json "$out/" 2>/dev/null
# the records and logs of every phase so far in one archive (the tool brings back few files), never a checkpoint
(cd /tmp/study && find . -path ./home/models -prune -o -type f \( -name '*.json' -o -name '*.md' -o -name '*.log' \
  -o -name '*.jsonl' \) -size -4M -print | grep -v '/output/' | tar -czf "$out/records.tar.gz" -T - 2>/dev/null)
