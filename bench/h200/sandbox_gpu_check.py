"""Does an agent in autorl's bwrap sandbox get the GPU when it is assigned one, and only then?

    python bench/h200/sandbox_gpu_check.py [BWRAP]

Runs a CUDA matmul inside the sandbox built by ``autorl.sandbox.bwrap_argv`` twice: with the GPUs passed
through (an agent with GPUs) and without (``--gpus grader=...`` leaving the agent none). Prints JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from autorl.sandbox import SandboxSpec, bwrap_argv, gpu_devices

PROBE = ("import json, torch; ok = torch.cuda.is_available(); "
         "r = {'cuda': ok, 'devices': torch.cuda.device_count() if ok else 0}; "
         "r.update(name=torch.cuda.get_device_name(0), "
         "sum=float((torch.ones(2048, 2048, device='cuda') @ torch.ones(2048, 2048, device='cuda')).sum())) if ok else None; "
         "print(json.dumps(r))")


def main() -> None:
    exe = sys.argv[1] if len(sys.argv) > 1 else "bwrap"
    ws = Path(tempfile.mkdtemp(prefix="ws-"))
    out = {"device_nodes": gpu_devices()}
    for gpus in (True, False):
        argv = bwrap_argv(SandboxSpec(workspace=ws, hidden=[Path.home()], gpus=gpus), [sys.executable, "-c", PROBE],
                          executable=exe, environ_path=os.environ.get("PATH", ""))
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        key = "with_gpus" if gpus else "without_gpus"
        try:
            out[key] = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            out[key] = {"rc": proc.returncode, "stderr": proc.stderr[-800:]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
