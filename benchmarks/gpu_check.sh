#!/usr/bin/env bash
# GPU readiness checks, for one CUDA GPU; about 5 minutes on one H100/H200, under 10.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]        (default OUT_DIR: runs/gpu_check)
#
# Without CUDA it prints one line and exits 0. With CUDA:
#   1. pytest tests/test_gpu.py tests/test_fused.py on the device: the fused Function's values and gradients against
#      the plain composition, gradcheck, bf16 autocast for every metric, the all-reduce under NCCL (one rank), an
#      EASTTrainer epoch in bf16, east-train end to end (text in bf16 and fp16, multi-label, the binary default with
#      an EMA, LDAM-DRW), each run reloaded on GPU and CPU; the JUnit report goes to OUT_DIR/test_gpu.xml
#   2. benchmarks/gpu_speed.py: OUT_DIR/gpu_speed.{json,md}, the loss and an EASTTrainer epoch against cross-entropy
#      (fp32, bf16), and where the loss's time goes
#   3. benchmarks/step_speed.py: OUT_DIR/step_speed_cuda_{fp32,bf16}.{json,md}, whole training steps, EAST vs CE, and
#      step_speed_cuda_text_{bf16,fp16}.{json,md}, the same for text_tiny and a BERT-base-sized model
# Exit status 1 if anything failed.
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
echo "== pytest tests/test_gpu.py tests/test_fused.py ($(date -u +%FT%TZ))"
timeout 300 "$PY" -m pytest -q -p no:cacheprovider --junitxml "$OUT_DIR/test_gpu.xml" tests/test_gpu.py \
    tests/test_fused.py || rc=1
echo "== gpu_speed.py (+$(( $(date +%s) - start )) s)"
timeout 240 "$PY" benchmarks/gpu_speed.py --out-dir "$OUT_DIR" || rc=1
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
echo "gpu_check.sh: exit $rc after $(( $(date +%s) - start )) s"
exit $rc
