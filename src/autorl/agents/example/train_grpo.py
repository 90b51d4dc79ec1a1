"""GRPO on the benchmark's training data with trl, rewarded by the benchmark's own answer checking.

Prompts are rendered with the grader's exact eval config, so training matches evaluation. A checkpoint
is saved under $OUTPUT_DIR and submitted every GRPO_SUBMIT_EVERY_S seconds, and once more when training
stops: after GRPO_TIME_FRACTION of the budget, and never later than GRPO_SAFETY_MARGIN_S before the deadline.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from autorl import Item, get_benchmark
from autorl.grader.client import GraderClient


def env(name: str, default: str) -> str:
    return os.environ.get(name, default)


DEADLINE = float(os.environ["AUTORL_DEADLINE"])
OUTPUT = Path(os.environ["OUTPUT_DIR"])
MARGIN = float(env("GRPO_SAFETY_MARGIN_S", "25"))
STARTED = time.time()
# stop training after this share of the budget: on the demo task the gains flatten well before the end
STOP_AT = min(DEADLINE - MARGIN, STARTED + float(env("GRPO_TIME_FRACTION", "0.65")) * (DEADLINE - STARTED))
SUBMIT_EVERY = float(env("GRPO_SUBMIT_EVERY_S", "45"))


def log(msg: str) -> None:
    print(f"[example-agent {time.strftime('%H:%M:%S')}] {msg}", flush=True)


benchmark = get_benchmark(os.environ["TASK"])()
cfg = benchmark.config()
rows = [json.loads(line) for line in (Path(os.environ["DATA_PATH"]) / "train.jsonl").read_text().splitlines() if line]
if not rows or not all(isinstance(r, dict) and "question" in r and "answer" in r for r in rows[:100]):
    raise SystemExit(f"the example agent needs question/answer training rows; {os.environ['TASK']} has none")
random.Random(0).shuffle(rows)
log(f"{len(rows)} training rows; prompt format: {cfg.render({'question': '...'})!r}")

dataset = Dataset.from_list(
    [{"prompt": cfg.render({"question": r["question"]}), "reference": str(r["answer"])} for r in rows]
)


def reward(completions: list[str], reference: list[str], **_: object) -> list[float]:
    out = []
    for text, ref in zip(completions, reference, strict=False):
        text = text if isinstance(text, str) else str(text)
        for stop in cfg.stop:
            text = text.split(stop, 1)[0]
        out.append(float(benchmark.score(Item(id="train", input={}, reference=ref), text)))
    return out


tokenizer = AutoTokenizer.from_pretrained(os.environ["MODEL_PATH"])
tokenizer.padding_side = "left"
if tokenizer.pad_token is None:
    tokenizer.pad_token = tokenizer.eos_token
model = AutoModelForCausalLM.from_pretrained(os.environ["MODEL_PATH"], dtype=torch.float32)
cuda = torch.cuda.is_available()
generations = int(env("GRPO_NUM_GENERATIONS", "8"))
client = GraderClient()
state = {"version": 0, "last_submit": time.time()}


def save_and_submit(wait: bool) -> None:
    state["version"] += 1
    target = OUTPUT / f"v{state['version']}"
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    record = client.submit(str(target), wait=wait)
    log(
        f"submitted {target.name}: {json.dumps({k: record.get(k) for k in ('submission_id', 'status', 'score', 'baseline_score', 'improvement')})}"
    )
    state["last_submit"] = time.time()


class Clock(TrainerCallback):
    def on_step_end(self, args, train_state, control, **kwargs):  # type: ignore[no-untyped-def]
        now = time.time()
        if now > STOP_AT:
            control.should_training_stop = True
        elif now - state["last_submit"] > SUBMIT_EVERY:
            save_and_submit(wait=False)
        return control


config = GRPOConfig(
    output_dir=str(Path(os.environ["WORKSPACE"]) / "code" / "grpo_runs"),
    learning_rate=float(env("GRPO_LR", "1e-4")),
    per_device_train_batch_size=int(env("GRPO_PROMPTS_PER_STEP", "8")) * generations,
    num_generations=generations,
    max_completion_length=cfg.max_new_tokens,
    temperature=float(env("GRPO_TEMPERATURE", "1.0")),
    max_steps=int(env("GRPO_MAX_STEPS", "100000")),
    logging_steps=10,
    save_strategy="no",
    report_to=[],
    bf16=cuda,
    use_cpu=not cuda,
    gradient_checkpointing=False,
    seed=int(env("GRPO_SEED", "0")),
    dataloader_num_workers=0,
    disable_tqdm=True,
)
trainer = GRPOTrainer(
    model=model,
    reward_funcs=reward,
    args=config,
    train_dataset=dataset,
    processing_class=tokenizer,
    callbacks=[Clock()],
)
log(f"training for {STOP_AT - time.time():.0f} s of the {DEADLINE - time.time():.0f} s left")
trainer.train()
save_and_submit(wait=True)
log("done")
