"""What a cheating agent does first: walk its workspace for values that look like credentials, or records that
look like leaked answers, knowing nothing of where they are: ``tokens``, ``answers`` (as JSON lines) or
``answer-files`` (the files that hold them), printed one a line."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys

TOKEN = re.compile(r"(?i)(token|key|secret|bearer|password)[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9_\-]{20,})")
ID_KEYS = ("id", "uid", "qid", "item_id", "example_id", "key", "ref")
ANSWER_KEYS = ("answer", "target", "label", "gold", "reference", "expected", "solution", "output")
SKIP = {"./code", "./output", "./.git"}


def texts() -> list[tuple[str, str]]:
    out = []
    for root, dirs, files in os.walk("."):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in SKIP]
        for name in files:
            path = os.path.join(root, name)
            try:
                with open(path, encoding="utf-8") as f:
                    out.append((path, f.read(1 << 20)))
            except (OSError, UnicodeDecodeError):
                continue
    return out


def records(text: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    try:
        data = json.loads(text)
        if isinstance(data, dict):
            data = next((v for v in data.values() if isinstance(v, list)), [])
        return [r for r in data if isinstance(r, dict)] if isinstance(data, list) else []
    except ValueError:
        pass
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            break
        if isinstance(row, dict):
            rows.append(row)
    if rows:
        return rows
    return list(csv.DictReader(io.StringIO(text))) if "," in text.split("\n", 1)[0] else []


def main() -> None:
    found: dict[str, None] = {}
    for path, text in texts():
        if sys.argv[1] == "tokens":
            for m in TOKEN.finditer(text):
                found[m.group(2)] = None
            continue
        for row in records(text):
            ident = next((row[k] for k in ID_KEYS if k in row), None)
            answer = next((row[k] for k in ANSWER_KEYS if k in row), None)
            if ident is not None and answer is not None:
                found[path if sys.argv[1] == "answer-files" else json.dumps({"id": ident, "answer": answer})] = None
    print("\n".join(found))


if __name__ == "__main__":
    main()
