"""The wire between the model's process and the checker's: plain data as JSON, both scripts, and the cap on a
reply. The model's program is served from the sandbox (:data:`SERVER`), one call a line; the problem's ``check``
runs in the checker (:data:`CHECKER`), which writes the run's token only after ``check`` returns."""

from __future__ import annotations

#: The longest reply (one call's return value, encoded) the checker accepts from a program.
REPLY_CAP = 1024 * 1024


#: Plain data as JSON, on both sides of the model's process: tuples, dicts with any keys and sets tagged so
#: that they come back as what they were, and nothing else accepted. ``NOT_PLAIN`` (set by the script) words
#: the refusal to encode. encode and decode share the walk (JSON's own values as they are, lists item by item)
#: and the tags; each is the other's inverse.
CODEC = r"""
TAGS = {tuple: "t", dict: "d", set: "s", frozenset: "s"}

def convert(v, tagged):
    if v is None or type(v) in (bool, int, float, str):
        return v
    if type(v) is list:
        return [convert(x, tagged) for x in v]
    return tagged(v)

def encode(v):
    return convert(v, encode_tagged)

def encode_tagged(v):
    tag = TAGS.get(type(v))
    if tag is None:
        raise TypeError(NOT_PLAIN.format(type(v).__name__))
    return {tag: encode([[k, x] for k, x in v.items()] if tag == "d" else list(v))}

class NotPlain(Exception):
    pass

def decode(v):
    return convert(v, decode_tagged)

def decode_tagged(v):
    if type(v) is dict and len(v) == 1:
        (tag, body), = v.items()
        if type(body) is list:
            if tag == "t":
                return tuple(decode(x) for x in body)
            if tag == "s":
                return {decode(x) for x in body}
            if tag == "d" and all(type(p) is list and len(p) == 2 for p in body):
                return {decode(k): decode(x) for k, x in body}
    raise NotPlain("the reply is not plain data")
"""

#: Runs in the sandbox, as the model's process: executes the model's program, then answers one call of
#: the entry point a line (arguments in, the return value out), all as plain data.
SERVER = (
    r"""
import json, os, sys
replies = os.fdopen(os.dup(1), "w", buffering=1)
calls = os.fdopen(os.dup(0), "r")
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
os.dup2(2, 1)

NOT_PLAIN = "returned a {}, which is not plain data"
"""
    + CODEC
    + r"""

namespace = {"__name__": "__main__"}
try:
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), namespace)
    function = namespace[sys.argv[2]]
except BaseException as exc:
    replies.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]}) + "\n")
    os._exit(1)
for line in calls:
    try:
        call = json.loads(line)
        reply = json.dumps({"value": encode(function(*decode(call["args"]), **decode(call["kwargs"])))})
    except BaseException as exc:
        reply = json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]})
    replies.write(reply + "\n")
"""
)

#: Runs outside the model's sandbox, executing only the problem's own code (its prompt and its tests):
#: ``check`` gets a stand-in for the candidate that calls the model's process and decodes its replies
#: as plain data. The token (known to this process and the grader only) is written after ``check``
#: returns, on a descriptor the model's process never holds.
CHECKER = (
    r"""
import ctypes, json, os, sys
try:
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem
except Exception:
    pass
job = json.loads(sys.stdin.readline())
result = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
calls = os.fdopen(job["call_fd"], "w", buffering=1)
replies = os.fdopen(job["reply_fd"], "rb")
CAP = job["reply_cap"]

NOT_PLAIN = "cannot pass a {} to the program"
"""
    + CODEC
    + r"""

class CandidateFailed(Exception):
    pass


def candidate(*args, **kwargs):
    try:
        calls.write(json.dumps({"args": encode(list(args)), "kwargs": encode(kwargs)}) + "\n")
    except OSError:
        raise CandidateFailed("the program stopped taking calls") from None
    line = replies.readline(CAP + 1)
    if not line.endswith(b"\n"):
        raise CandidateFailed("the program stopped answering" if len(line) <= CAP else "the program's reply is too long")
    try:
        reply = json.loads(line)
    except (ValueError, RecursionError):
        raise CandidateFailed("the program's reply is not JSON") from None
    if type(reply) is not dict or not ("value" in reply or "error" in reply):
        raise CandidateFailed("the program's reply is not a reply")
    if "error" in reply:
        raise CandidateFailed(str(reply["error"])[:300])
    try:
        return decode(reply["value"])
    except NotPlain:
        raise CandidateFailed("the program's reply is not plain data") from None
    except RecursionError:
        raise CandidateFailed("the program's reply is nested too deep") from None

namespace = {"__name__": "__check__"}
exec(compile(job["prompt"], "prompt.py", "exec"), namespace)
namespace[job["entry_point"]] = candidate  # tests that call the function by its name call the model's
exec(compile(job["test"], "test.py", "exec"), namespace)
namespace["check"](candidate)
result.write(job["token"] + "\n")
result.flush()
"""
)
