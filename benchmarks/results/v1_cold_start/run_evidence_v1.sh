#!/usr/bin/env bash
# Reproduces benchmarks/results/{digits_longtail,digits9_binary}/ (CPU, offline, about 40 min on 2 cores).
# Runs go to runs/evidence/<task>/ (resumable: re-run this script after an interruption); tables are copied here.
#  (a) digits_longtail: EAST vs CE vs Dice, the CE warm start, and (c) per-class beta 0.25 / 5 on digit 3.
#  (b) digits9_binary: EAST vs CE vs Dice and the ablations (warm start, no best-weight restore, r = 0.8).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_EVALUATE_OFFLINE=1
BIN=${BIN:-.venv/bin}

run() {  # task, east-compare arguments...
  local task=$1; shift
  "$BIN/east-compare" "benchmarks/recipes/$task.yaml" --seeds 3 --output_dir "runs/evidence/$task" "$@" -- --model_card false
  mkdir -p "benchmarks/results/$task"
  cp "runs/evidence/$task"/results.{md,json,png} "benchmarks/results/$task/"
}

run digits9_binary --losses east,ce,dice \
  --variants "warm_start:--east_warm_start ce" "no_restore:--east_restore_best_per_stage false" "r0.8:--east_decay 0.8"
run digits_longtail --losses east,ce,dice \
  --variants "warm_start:--east_warm_start ce" "beta0.25_on_3:--east_beta '{3: 0.25}'" "beta5_on_3:--east_beta '{3: 5}'" \
  "warm_start_70:--east_warm_start ce --east_warm_start_steps 70"

# (b) follow-ups: ten seeds of EAST and CE, and two probes of where the gap comes from (reuses the runs above).
copy_as() { mkdir -p "benchmarks/results/$2" && cp "runs/evidence/$1"/results.{md,json,png} "benchmarks/results/$2/"; }
"$BIN/east-compare" benchmarks/recipes/digits9_binary.yaml --losses east,ce --seeds 10 \
  --output_dir runs/evidence/digits9_binary -- --model_card false
copy_as digits9_binary digits9_binary_10seeds
"$BIN/east-compare" benchmarks/recipes/digits9_binary.yaml --losses east,ce --seeds 3 --output_dir runs/evidence/digits9_binary \
  --variants "fast_stages:--east_stage_monitor eval_fbeta" "no_tau_grad:--east_threshold_grad false" -- --model_card false
copy_as digits9_binary digits9_binary_probes
run digits9_binary --losses east,ce,dice \
  --variants "warm_start:--east_warm_start ce" "no_restore:--east_restore_best_per_stage false" "r0.8:--east_decay 0.8"

# (b) more probes: batch size 512 (a larger batch for the batch-level surrogate), and a macro (two-class) objective
# with macro model selection, reporting digit 9's precision and recall.
"$BIN/east-compare" benchmarks/recipes/digits9_binary.yaml --losses east,ce --seeds 3 --output_dir runs/evidence/digits9_binary \
  --variants "east_bs512:--per_device_train_batch_size 512" "ce_bs512:--east_loss ce --per_device_train_batch_size 512" \
  -- --model_card false
copy_as digits9_binary digits9_binary_probes_batch
"$BIN/east-compare" benchmarks/recipes/digits9_binary.yaml --seeds 3 --output_dir runs/evidence/digits9_binary_macro \
  --variants "macro_surrogate:--east_average macro --report_classes 9" \
  "ce_macro_select:--east_loss ce --east_average macro --report_classes 9" -- --model_card false
copy_as digits9_binary_macro digits9_binary_probes_macro
run digits9_binary --losses east,ce,dice \
  --variants "warm_start:--east_warm_start ce" "no_restore:--east_restore_best_per_stage false" "r0.8:--east_decay 0.8"
