#!/usr/bin/env bash
# On the GPU machine: unpack.sh PIECE_DIR [--last]. Collects one carried piece in /tmp/wh; with --last, checks
# all pieces against SHA256SUMS and unpacks the tree to /tmp/site. Send the pieces in commands back to
# back: /tmp lasts only while the machine stays up. Then run with
#   PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0
# (without the second, the engine imports flashinfer, which is not in the bundle).
set -u
piece=${1:?usage: unpack.sh PIECE_DIR [--last]}
mkdir -p /tmp/wh && cp "$piece"/* /tmp/wh/ && ls -l /tmp/wh
if [ "${2:-}" = --last ]; then
  (cd /tmp/wh && sha256sum -c SHA256SUMS) || { echo "the pieces do not match SHA256SUMS" >&2; exit 3; }
  [ -f /tmp/site/vllm/__init__.py ] || cat /tmp/wh/site.tar.xz.part* | xz -dc -T4 | tar -x -C /tmp
  du -sh /tmp/site
fi
