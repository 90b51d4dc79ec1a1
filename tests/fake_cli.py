"""A stand-in for a coding-agent CLI (claude, codex, ...): records how it was started, may submit, exits as told.

Copied onto PATH under the CLI's name. ``FAKE_CLI_SUBMIT=N`` makes a stub checkpoint answering N echo items
and submits it through the grader; ``FAKE_CLI_EXIT`` is the exit status.
"""

import json
import os
import sys
from pathlib import Path

name = Path(sys.argv[0]).name
workspace = Path(os.environ["WORKSPACE"])
record = {
    "name": name,
    "argv": sys.argv[1:],
    "env": dict(os.environ),
    "cwd": os.getcwd(),
    "stdin_is_tty": os.isatty(0),
    "stdin": sys.stdin.read(),
}
(workspace / "code").mkdir(exist_ok=True)
(workspace / "code" / f"{name}.invocation.json").write_text(json.dumps(record))
print(json.dumps({"type": "system", "subtype": "init", "cwd": os.getcwd()}), flush=True)
if os.environ.get("FAKE_CLI_SUBMIT"):
    sys.path.insert(0, os.environ["FAKE_CLI_TESTS"])
    from autorl.grader.client import GraderClient
    from tests.conftest import echo_answers, write_stub_checkpoint

    ckpt = write_stub_checkpoint(
        Path(os.environ["OUTPUT_DIR"]) / "v1", echo_answers(int(os.environ["FAKE_CLI_SUBMIT"]))
    )
    answer = GraderClient().submit(ckpt)
    print(json.dumps({"type": "tool_result", "content": answer}), flush=True)
print(json.dumps({"type": "result", "subtype": "success", "is_error": False}), flush=True)
sys.exit(int(os.environ.get("FAKE_CLI_EXIT", "0")))
