#!/usr/bin/env bash
# Build, on a machine that reaches PyPI, what vllm 0.22.0 needs on a GPU machine that has Python 3.12,
# torch 2.11.0+cu130 and transformers but no package registry: vllm and the 21 packages that `import vllm`
# plus offline LLM(...).generate(...) (LoRA included) load and such an image lacks, found by trying.
#
#   bench/h200/build_bundle.sh DEST     ->  DEST/p0 DEST/p1 DEST/p2 (xz pieces of <= 60 MiB) + p2/SHA256SUMS
#
# Carry one piece folder per command to the GPU machine and unpack there with bench/h200/unpack.sh.
set -euo pipefail
dest=${1:?usage: build_bundle.sh DEST}
mkdir -p "$dest/whl"
dest=$(cd "$dest" && pwd)  # absolute: the checksums are written from inside it
tags=(--only-binary=:all: --python-version 3.12 --implementation cp)
for n in 5 17 24 26 27 28 31; do tags+=(--platform "manylinux_2_${n}_x86_64"); done
tags+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
# order: vllm itself, then its runtime needs; versions pinned to what was tested together
wheels=(
  vllm==0.22.0
  pydantic==2.14.4 pydantic_core==2.50.5 typing_inspection==0.4.5 annotated_types==0.8.0
  msgspec==0.23.0 pyzmq==27.3.0 cbor2==6.3.0 cachetools==8.0.2 pybase64==1.5.1 gguf==0.19.0
  openai==3.57.0 httpx2==2.16.2 sniffio==1.3.1 openai_harmony==0.0.8 partial_json_parser==0.2.1.1.post7
  fastapi==0.165.0 starlette==1.10.0 opentelemetry-api==1.45.2
  llguidance==1.7.6 xgrammar==0.2.5.post1 apache-tvm-ffi==0.1.9
)
python3 -m pip download -q --no-deps "${tags[@]}" -d "$dest/whl" "${wheels[@]}"
rm -rf "$dest/site"
python3 -m pip install -q --no-deps --no-compile --no-index "${tags[@]}" --target "$dest/site" "$dest"/whl/*.whl
# never loaded on Hopper: the FlashAttention-2 kernels (FA3 is used) and xgrammar's static library
rm -f "$dest/site/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" "$dest/site/xgrammar/lib/libxgrammar.a"
rm -rf "$dest/site/bin"
tar -C "$dest" -cf - site | xz -T0 -6 > "$dest/site.tar.xz"
rm -rf "$dest"/p? "$dest/site"
split -b 60M -d -a 1 "$dest/site.tar.xz" "$dest/site.tar.xz.part"
rm "$dest/site.tar.xz"
for f in "$dest"/site.tar.xz.part*; do k=${f##*part}; mkdir -p "$dest/p$k"; mv "$f" "$dest/p$k/"; done
last=$(ls -d "$dest"/p? | tail -1)
(cd "$dest" && sha256sum p?/site.tar.xz.part* | sed 's| p./| |' > "$last/SHA256SUMS")
ls -l "$dest"/p?/*
