"""One honest submission, then ``rm -rf $OUTPUT_DIR && ln -s / $OUTPUT_DIR`` and submissions of another run's
snapshot and a hub-cache model through it (and around it). ``ATTACK["targets"]``: host paths of those models."""

import json
import os
import shutil
import sys

sys.path.insert(0, json.loads(os.environ["ATTACK"])["tests_root"])
from tests.conftest import echo_answers, write_stub_checkpoint
from tests.hostile.common import CFG, OUTPUT, finish, submit

honest = write_stub_checkpoint(OUTPUT / "v1", echo_answers(12))
submit(str(honest), "honest")
shutil.rmtree(OUTPUT)
os.symlink("/", OUTPUT)
for target in CFG["targets"]:
    submit(f"{OUTPUT}{target}", "through the link")
    submit(f"output{target}", "relative through the link")
    submit(target, "absolute")
    submit(f"{OUTPUT}/../..{target}", "dot-dot")
finish()
