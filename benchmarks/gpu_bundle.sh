#!/usr/bin/env bash
# Build TensorFlow for a lent GPU machine that has no TensorFlow, no network and CUDA 13 only,
# in pieces small enough to travel one per call (the device tool carries at most 64 MiB).
#
# Usage (here, from the repository root; needs pip's network, gcc and zstd):
#   bash benchmarks/gpu_bundle.sh           # -> .g0/ ... .g8/ (ignored), about 375 MB in all
# Then one device call per folder, each carrying it: `mkdir -p /tmp/ch && cp .gN/* /tmp/ch/`
# (the machine keeps /tmp while it stays warm; a folder not carried is removed there), and
# finally: `mkdir -p /tmp/b && cd /tmp/b && cat /tmp/ch/p[0-9][0-9] | /tmp/ch/zstd -dq --long=30 | tar x`,
# the environment of benchmarks/results/throughput_gpu.md ("How TensorFlow ran"), and
# `python3 benchmarks/gpu_check.py && OUT=$OUT PYTHON=python3 bash benchmarks/gpu_run.sh`.
#
# What it holds: the cp312 TensorFlow 2.21 wheel (a CUDA 12.5 build) without its C++ headers,
# Keras and the few pure-Python needs the machine's image lacks, the CUDA 12 runtime and ptxas.
# cuBLAS is the machine's own CUDA 13 one, linked there under the CUDA 12 names (checked by
# gpu_check.py against float64 NumPy); cuFFT, cuSOLVER and cuSPARSE, which TensorFlow opens at
# start-up but the benchmark never calls, are empty libraries of the same names.
set -euo pipefail
work=${WORK:-/tmp/adpue_gpu_bundle}
rm -rf "$work" && mkdir -p "$work/site" "$work/whl"
plat=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$work/whl")
python3 -m pip download -q "${plat[@]}" tensorflow==2.21.0 keras==3.15.1 namex==0.1.0 \
  optree==0.20.0 ml_dtypes==0.6.0 protobuf==7.36.2 astunparse==1.6.3 gast==0.7.0 \
  google-pasta==0.2.0 termcolor==3.3.0 nvidia-cuda-runtime-cu12==12.5.82 \
  nvidia-cuda-nvcc-cu12==12.5.82
for w in "$work"/whl/*.whl; do unzip -qo "$w" -d "$work/site"; done
rm -rf "$work/site/tensorflow/include" "$work/site/nvidia/cuda_nvcc/nvvm/lib64"
echo 'int adpue_empty(void) { return 0; }' >"$work/empty.c"
for lib in cufft:libcufft.so.11 cusolver:libcusolver.so.11 cusparse:libcusparse.so.12; do
  mkdir -p "$work/site/nvidia/${lib%%:*}/lib"
  gcc -shared -fPIC -o "$work/site/nvidia/${lib%%:*}/lib/${lib#*:}" -Wl,-soname,"${lib#*:}" "$work/empty.c"
done
(cd "$work" && tar cf - site | zstd -15 --long=30 -T0 -q -o site.tar.zst)
# Pieces of 44 MB: a call carries the tracked tree too (about 17 MB) and at most 64 MiB in all.
split -b 44M -d -a 2 "$work/site.tar.zst" "$work/p"
rm -rf .g[0-9]
for piece in "$work"/p[0-9][0-9]; do i=$((10#${piece##*/p})); mkdir ".g$i" && mv "$piece" ".g$i/"; done
cp "$(command -v zstd)" .g0/
grep -qx '/.g\[0-9\]/' .git/info/exclude 2>/dev/null || echo '/.g[0-9]/' >>.git/info/exclude
ls -l .g?/
