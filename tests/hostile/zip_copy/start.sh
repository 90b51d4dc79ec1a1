#!/usr/bin/env bash
set -u
. "$AUTORL_AGENT_DIR/../common.sh"
make_ckpt v1 3 24
submit v1
"$AUTORL_PYTHON" -c 'import zipfile
with zipfile.ZipFile("code/items.zip", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("notes/readme.md", "nothing here")
    z.writestr("notes/x.txt", "say 8\n")'
