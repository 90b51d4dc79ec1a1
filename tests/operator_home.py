"""An operator's home as users have one: command-line tools installed the ways people install them (a pipx venv
linked from ``~/.local/bin``, a ``pip --user`` script, a rustup-style ``~/.cargo/bin``, an ``npm -g`` CLI linked
into ``~/.local/lib/node_modules``, a ``~/bin`` that is a link) and keys kept beside them. What the sandbox tests
run the agent in: each tool must run, no key may be read."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: where operators keep their keys, relative to the home, and a line of each that is a key
KEYS = {
    ".local/share/opencode/auth.json": '{"openai": {"key": "sk-OPENCODE-KEY-1f3a9c"}}',
    ".config/gh/hosts.yml": "github.com:\n  oauth_token: gho_CONFIG-GH-KEY-77ab12",
    ".cargo/credentials.toml": '[registry]\ntoken = "cio_CARGO-KEY-5d2e71"',
    ".netrc": "machine api.example.com login me password NETRC-KEY-0c4b8d",
    ".aws/credentials": "[default]\naws_secret_access_key = AWS-KEY-9e1f04",
    ".ssh/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nSSH-KEY-3a7d55\n-----END OPENSSH PRIVATE KEY-----",
    ".local/bin/.tool-token": "DOTFILE-KEY-6b0e2a",
    "notes/api-keys.txt": "HOME-NOTES-KEY-8c1d9f",
}
#: what each tool prints when it runs
TOOLS = {
    "pipxtool": "pipxtool ran",
    "usertool": "usertool ran",
    "cargotool": "cargotool ran",
    "nodetool": "nodetool ran",
    "dottool": "dottool ran",
}


@dataclass
class OperatorHome:
    root: Path
    path: str
    tools: dict[str, str] = field(default_factory=lambda: dict(TOOLS))

    def key_markers(self) -> list[str]:
        """The part of each planted key that would show it was read."""
        return [m for text in KEYS.values() for m in re.findall(r"[A-Z]+-KEY-[0-9a-f]{6}", text)]

    def env(self) -> dict[str, str]:
        return {"HOME": str(self.root), "PATH": self.path, "XDG_CACHE_HOME": str(self.root / ".cache")}


def _script(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def make_operator_home(root: Path) -> OperatorHome:
    """A home at ``root`` with each tool installed its usual way and :data:`KEYS` planted; its ``PATH`` lists
    ``~/.local/bin``, ``~/.cargo/bin``, ``~/bin`` (a link), the home itself, a relative and an empty entry, then
    the system's."""
    local = root / ".local"
    # pipx: a venv of its own under ~/.local/share/pipx/venvs, its entry point linked from ~/.local/bin
    venv = local / "share" / "pipx" / "venvs" / "pipxtool"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "pipxtool_impl.py").write_text(f"def main():\n    print({TOOLS['pipxtool']!r})\n")
    _script(venv / "bin" / "pipxtool", f"#!{venv / 'bin' / 'python'}\nfrom pipxtool_impl import main\nmain()\n")
    (local / "bin").mkdir(parents=True)
    (local / "bin" / "pipxtool").symlink_to(venv / "bin" / "pipxtool")
    # pip --user: a script in ~/.local/bin whose module is in the user's site-packages
    system_python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    version = subprocess.run(
        [system_python, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    user_site = local / "lib" / f"python{version}" / "site-packages"
    user_site.mkdir(parents=True)
    (user_site / "usertool_impl.py").write_text(f"def main():\n    print({TOOLS['usertool']!r})\n")
    _script(local / "bin" / "usertool", f"#!{system_python}\nfrom usertool_impl import main\nmain()\n")
    # rustup-style: binaries in ~/.cargo/bin, the registry's credentials beside them
    _script(root / ".cargo" / "bin" / "cargotool", f"#!/bin/sh\necho {TOOLS['cargotool']!r}\n")
    # npm -g under the home: ~/.local/bin/<cli> -> ../lib/node_modules/<pkg>/bin/cli.js, which needs its package
    package = local / "lib" / "node_modules" / "nodetool"
    node = shutil.which("node")
    if node:
        _script(package / "bin" / "cli.js", "#!/usr/bin/env node\nconsole.log(require('../lib/say.js'));\n")
        (package / "lib").mkdir()
        (package / "lib" / "say.js").write_text(f"module.exports = {json.dumps(TOOLS['nodetool'])};\n")
    else:  # no node here: the same layout with a Python script
        _script(
            package / "bin" / "cli.js",
            f"#!{system_python}\nimport runpy, os\n"
            "runpy.run_path(os.path.join(os.path.dirname(os.path.realpath(__file__)), '..', 'lib', 'say.py'))\n",
        )
        (package / "lib").mkdir()
        (package / "lib" / "say.py").write_text(f"print({TOOLS['nodetool']!r})\n")
    (package / "package.json").write_text('{"name": "nodetool", "bin": {"nodetool": "bin/cli.js"}}\n')
    (local / "bin" / "nodetool").symlink_to(Path("..") / "lib" / "node_modules" / "nodetool" / "bin" / "cli.js")
    # ~/bin is a link to a dotfiles checkout
    _script(root / "dotfiles" / "bin" / "dottool", f"#!/bin/sh\necho {TOOLS['dottool']!r}\n")
    (root / "bin").symlink_to(root / "dotfiles" / "bin", target_is_directory=True)
    for rel, text in KEYS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    _script(root / "home-script.sh", "#!/bin/sh\necho home script\n")  # the home itself on PATH: its programs
    entries = [local / "bin", root / ".cargo" / "bin", root / "bin", root, "bin", "", os.environ.get("PATH", "")]
    return OperatorHome(root, os.pathsep.join(str(e) for e in entries))
