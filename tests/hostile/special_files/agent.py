"""Checkpoints that would hang or fill a grader that reads paths: a FIFO nobody writes, ``/dev/zero`` linked
as the weights, a sparse 100 GB weights file; then one honest submission."""

import json
import os
import sys

sys.path.insert(0, json.loads(os.environ["ATTACK"])["tests_root"])
from tests.conftest import echo_answers, write_stub_checkpoint
from tests.hostile.common import OUTPUT, finish, submit

fifo = write_stub_checkpoint(OUTPUT / "fifo", echo_answers(20))
(fifo / "model.safetensors").unlink()
os.mkfifo(fifo / "model.safetensors")
submit(str(fifo), "fifo")
zero = write_stub_checkpoint(OUTPUT / "zero", echo_answers(20))
(zero / "model.safetensors").unlink()
os.symlink("/dev/zero", zero / "model.safetensors")
submit(str(zero), "dev-zero")
sparse = write_stub_checkpoint(OUTPUT / "sparse", echo_answers(20))
with open(sparse / "model-00002.safetensors", "wb") as f:
    f.truncate(100 * 2**30)
submit(str(sparse), "sparse")
honest = write_stub_checkpoint(OUTPUT / "v1", echo_answers(12))
submit(str(honest), "honest")
finish()
