"""Supervised fine-tuning of the base model on $DATA_PATH/train.jsonl on the GPU the run gives the agent,
submitting a checkpoint every SFT_SUBMIT_EVERY_S seconds until the deadline nears. Logs what CUDA it sees."""

import json
import os
import random
import time
from pathlib import Path

import httpx
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

deadline = float(os.environ["AUTORL_DEADLINE"])
out = Path(os.environ["OUTPUT_DIR"])
url, token = os.environ["GRADING_SERVER_URL"], os.environ["AUTORL_TOKEN"]
print("agent CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"), "cuda", torch.cuda.is_available(),
      torch.cuda.device_count(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-", flush=True)
device = "cuda" if torch.cuda.is_available() else "cpu"
budget = os.environ.get("AUTORL_GPU_MEMORY_BUDGET")  # what the run leaves the agent of a GPU it shares
if budget and device == "cuda":
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, int(budget) / total))
    print(f"agent GPU memory budget {int(budget) / 2**30:.1f} GiB of {total / 2**30:.1f}", flush=True)
tok = AutoTokenizer.from_pretrained(os.environ["MODEL_PATH"])
model = AutoModelForCausalLM.from_pretrained(os.environ["MODEL_PATH"]).to(device)
rows = [json.loads(x) for x in (Path(os.environ["DATA_PATH"]) / "train.jsonl").read_text().splitlines()]
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
eos = tok.eos_token or ""
step, version, last = 0, 0, time.time()
while time.time() < deadline - 20:
    batch = random.sample(rows, 64)
    texts = [f"Q: {r['question']}\nA: {r['answer']}\n{eos}" for r in batch]
    enc = tok(texts, return_tensors="pt", padding=True).to(device)
    labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
    loss = model(**enc, labels=labels).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    step += 1
    if time.time() - last > float(os.environ.get("SFT_SUBMIT_EVERY_S", "25")):
        version += 1
        path = out / f"v{version}"
        model.save_pretrained(path)
        tok.save_pretrained(path)
        r = httpx.post(f"{url}/submit?wait=false", json={"model_path": str(path)},
                       headers={"Authorization": f"Bearer {token}"}, timeout=60, trust_env=False)
        mem = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else 0
        print(f"step {step} loss {loss.item():.3f} submitted v{version}: {r.status_code} {r.text[:120]}; "
              f"agent peak CUDA memory {mem:.0f} MiB", flush=True)
        last = time.time()
