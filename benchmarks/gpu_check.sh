#!/usr/bin/env bash
# GPU readiness checks, for one CUDA GPU; about 5 minutes on one H100/H200, under 10.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]        (default OUT_DIR: runs/gpu_check)
#
# Without CUDA it prints one line and exits 0. With CUDA it writes into OUT_DIR:
#   gpu_check.json / gpu_check.md          loss fwd+bwd vs CE (fp32, bf16), the fused Function's gradients on the
#                                          device, one EASTTrainer epoch of darknet19 in bf16 vs CE, NCCL all-reduce
#                                          and east-train end to end on the device (text in bf16 and fp16,
#                                          multi-label, the binary default with an EMA), reloaded on GPU and CPU
#   step_speed_cuda_{fp32,bf16}.json / .md whole training steps, EAST vs CE (benchmarks/step_speed.py)
#   step_speed_cuda_text_{bf16,fp16}.json / .md   the same for text_tiny and a BERT-base-sized model
# then runs tests/test_fused.py (its CUDA tests included) if pytest is installed. Exit status 1 if anything failed.
# Python: $PYTHON, else .venv/bin/python, else python3; east_hf is taken from this checkout (PYTHONPATH).
set -u
cd "$(dirname "$0")/.."
OUT_DIR=${1:-runs/gpu_check}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
    echo "gpu_check: no CUDA device visible to $PY (torch.cuda.is_available() is False), skipped"
    exit 0
fi
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_EVALUATE_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
mkdir -p "$OUT_DIR"
rc=0
start=$(date +%s)
echo "== gpu_check.py ($(date -u +%FT%TZ))"
timeout 300 "$PY" benchmarks/gpu_check.py --out-dir "$OUT_DIR" || rc=1
for dtype in fp32 bf16; do
    echo "== step_speed.py --device cuda --dtype $dtype (+$(( $(date +%s) - start )) s)"
    timeout 90 "$PY" benchmarks/step_speed.py --device cuda --dtype "$dtype" --repeats 11 --block-ms 60 \
        --json "$OUT_DIR/step_speed_cuda_$dtype.json" --markdown "$OUT_DIR/step_speed_cuda_$dtype.md" || rc=1
done
for dtype in bf16 fp16; do
    echo "== step_speed.py --device cuda --dtype $dtype, text models (+$(( $(date +%s) - start )) s)"
    timeout 120 "$PY" benchmarks/step_speed.py --device cuda --dtype "$dtype" --repeats 11 --block-ms 60 \
        --configs text_tiny_b32_s128_c2,bert_base_b32_s128_c2,bert_base_b8_s128_c2 \
        --json "$OUT_DIR/step_speed_cuda_text_$dtype.json" --markdown "$OUT_DIR/step_speed_cuda_text_$dtype.md" || rc=1
done
if "$PY" -c "import pytest" >/dev/null 2>&1; then
    echo "== pytest tests/test_fused.py (+$(( $(date +%s) - start )) s)"
    timeout 60 "$PY" -m pytest -q -p no:cacheprovider tests/test_fused.py || rc=1
fi
echo "gpu_check.sh: exit $rc after $(( $(date +%s) - start )) s"
exit $rc
