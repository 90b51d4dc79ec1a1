"""A thread keeps replacing ``scores.json`` (and the temp name the grader once used) with links to
``ATTACK["victim"]``, a host file outside the workspace, while the agent submits: every mirror write of
the grader is a chance to write or chmod through a link."""

import contextlib
import json
import os
import sys
import threading
import time

sys.path.insert(0, json.loads(os.environ["ATTACK"])["tests_root"])
from tests.conftest import echo_answers, write_stub_checkpoint
from tests.hostile.common import CFG, OUTPUT, WS, attempts, finish, submit

stop = threading.Event()
planted = 0


def plant() -> None:
    global planted
    while not stop.is_set():
        for name in ("scores.json", ".scores.json.tmp"):
            with contextlib.suppress(OSError):
                os.unlink(WS / name)
            try:
                os.symlink(CFG["victim"], WS / name)
                planted += 1
            except OSError:
                pass


thread = threading.Thread(target=plant, daemon=True)
thread.start()
end = time.monotonic() + 6
k = 0
while time.monotonic() < end or k < 3:
    k += 1
    ckpt = write_stub_checkpoint(OUTPUT / f"v{k}", echo_answers(12 if k == 1 else k % 10))
    submit(str(ckpt), f"honest {k}")
stop.set()
thread.join()
attempts.append({"label": "planted", "count": planted})
finish()
