#!/usr/bin/env bash
# On the H200 machine, after bench/h200/unpack.sh has unpacked vllm to /tmp/site: one `autorl run` in which the
# agent (bench/h200/gpu_agent: SFT with torch) trains on GPU 0 inside the bwrap sandbox while the grader
# evaluates every submission with the vllm backend on the same GPU (--gpus agent=0,grader=0: a 0.25 memory
# share). Writes run.log, smi.log and the run's logs and result.json to $1. Carried beside the repository:
# .whl/ (the uvicorn wheel, which that image lacks) and .bw/ (bwrap, its libraries and bwrap-run, a wrapper
# that sets LD_LIBRARY_PATH for it). Recorded run: results-gpu-shared-run/.
set -uo pipefail
out=${1:?usage: gpu_shared_run.sh OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 -m pip install -q --no-index --no-deps --target /tmp/site2 "$root"/.whl/*.whl
export PYTHONPATH="$root/src:/tmp/site:/tmp/site2" VLLM_USE_FLASHINFER_SAMPLER=0 AUTORL_HOME=/tmp/ah PYTHONUNBUFFERED=1
export AUTORL_BWRAP="$root/.bw/bwrap-run"
python3 "$root/bench/vllm_vs_hf.py" prepare --out /tmp/vb >/dev/null 2>&1 || true
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv -l 5 > "$out/smi.log" 2>&1 &
smi=$!
python3 -c "from autorl.cli import main; main()" run --agent "$root/bench/h200/gpu_agent" --task arith \
  --model /tmp/vb/model --timeout 100 --backend vllm --gpus agent=0,grader=0 --sandbox bwrap \
  --agent-env SFT_SUBMIT_EVERY_S=40 --json 2>&1 | tee "$out/run.log"
kill $smi 2>/dev/null
ws=$(ls -d /tmp/ah/runs/arith/*/ | tail -1)
for f in agent.log grading_server.log result.json; do cp "$ws/$f" "$out/" 2>/dev/null; done
