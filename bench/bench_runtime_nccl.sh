#!/usr/bin/env bash
# RCollective vs dist.all_reduce on NCCL: the bench_runtime.py table on GPUs, one rank per GPU.
#
#   bash bench/bench_runtime_nccl.sh                 # every visible GPU (needs 2 or more)
#   NGPU=2 bash bench/bench_runtime_nccl.sh --rounds 5
#
# Extra arguments go to bench/bench_runtime.py. Runs with a time limit (TIMEOUT seconds, default
# 1800) and NCCL's async error handling on, so a hung group ends with an error instead of hanging.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
NGPU=${NGPU:-$("$PY" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)')}
if [ "$NGPU" -lt 2 ]; then
    echo "bench_runtime_nccl.sh: needs 2 or more CUDA GPUs, found $NGPU" >&2
    exit 2
fi
export TORCH_NCCL_ASYNC_ERROR_HANDLING=${TORCH_NCCL_ASYNC_ERROR_HANDLING:-1}
exec timeout "${TIMEOUT:-1800}" "$PY" bench/bench_runtime.py --backend nccl --ranks "$NGPU" --rounds 3 \
    --sizes 1 16384 262144 4194304 26214400 --ablations "$@"
