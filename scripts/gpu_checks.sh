#!/usr/bin/env bash
# Every GPU check of the lab in one run, for a session with an NVIDIA card. Each part is
# time-boxed, and the whole script keeps to a budget (BUDGET seconds, default 530: under 9
# minutes, one device call): a part gets its box or what is left of the budget, whichever
# is less, and is skipped with a line when under 20 s are left. Parts run in the order of
# PARTS (default: plan large count sample compile economical monitor probe).
# STEPS=512 halves the economical benchmark's part (its default here is 256: it was
# measured at 1024 on an H200 already, docs/gpu-2026-11-30/).
#     bash scripts/gpu_checks.sh OUT_DIR
#     SMOKE=1 bash scripts/gpu_checks.sh OUT_DIR   # the plumbing on the CPU, tiny sizes
#         (no GPU needed: the large and compile parts at a tiny shape, aot_eager, no cap;
#          the parts that need a card are skipped). The lean cases need bitsandbytes with
#          CUDA kernels on the GPU machine (a bare one has none: bring its wheel as below,
#          or they are reported as skipped).
# Needs torch with CUDA, numpy, tokenizers; nvidia-ml-py for the monitor and the observed
# memory; platformdirs for the sizing check (on a bare machine: bring its wheel, e.g.
# `python3 -m pip install -q --no-index --no-deps --target /tmp/site platformdirs-*.whl`
# and `export PYTHONPATH=/tmp/site`).
# In order of importance:
#   plan.json    the trainer's machine (torch) and the lab's (NVML) plan the whole grid alike
#                on this card (scripts/gpu_check_plan.py; seconds, no training)
#   large.jsonl  the seed's full shape (1,667,801,088 weights, batch 1, bf16) ~30 steps: the
#                normal mode uncapped; the lean state the estimate picks (true, level off)
#                and "fused" + selective capped to 16 GB, "offload" capped to 6.2 GB; peak
#                allocated, NVML observed, median step
#                (scripts/gpu_check_large.py)
#   count.jsonl  the counted peak (trainer.step.memory_count) beside max_memory_allocated for
#                "fused" and "offload" at full recompute, capped, and "one_pass" at full recompute
#                capped to 6.2 GB; the fused and the one-pass step against the normal one at half
#                depth, alternating, 3 runs each (scripts/gpu_check_large.py)
#   sample_static_{bf16,fp32}.json  generation's decode step as one CUDA graph against the
#                eager growing cache: tokens/s alternating, tokens agreeing (python -m bench.sample --static cuda)
#   compile.jsonl compiled against eager steps at the default model and at the full one
#   economical.log, bench_selective.json, bench_full.json: the economical mode against the normal one (scripts/gpu_check_economical.sh:
#                the side-by-side benchmark, the `full` level, bit-exact resume on CUDA)
#   probe.json   where a step's time goes, by mode and by size: wall vs host-enqueue time,
#                kernel-busy time, kernels per step, peak memory (scripts/gpu_probe.py); the
#                ladder of sizes calibrates and checks app/sizing's speed model
#   monitor.json what the GPU monitor shows on the real card (scripts/gpu_check_monitor.py)
#   trainer.json bit-exact resume + the trainer step vs a plain loop + MFU (only with
#                "trainer" in PARTS: measured on an H200 already, docs/gpu-2026-11-30/)
set -u
cd "$(dirname "$0")/.."
OUT=${1:-gpu-out}
PY=${PYTHON:-python3}
WORK=$(mktemp -d)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHON="$PY"
BUDGET=${BUDGET:-530}
PARTS=${PARTS:-plan large count sample compile economical monitor probe}
SMOKE=${SMOKE:-0}
STARTED=$SECONDS
# box SECONDS: the time this part may take, within what is left of the budget (0: skip).
box() {
  local left=$((BUDGET - (SECONDS - STARTED)))
  [ "$left" -lt 20 ] && { echo 0; return; }
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}
run_part() {  # run_part NAME BOX COMMAND...: time-boxed, its exit status said
  local name=$1 limit
  limit=$(box "$2"); shift 2
  if [ "$limit" -eq 0 ]; then echo "$name: skipped (the ${BUDGET} s budget is spent)"; return; fi
  local began=$SECONDS
  timeout "$limit" "$@"
  echo "$name: exit $? in $((SECONDS - began)) s (box ${limit} s)"
}
large_flags=""
[ "$SMOKE" = 1 ] && large_flags="--smoke"
nvidia-smi --query-gpu=name,driver_version,memory.total,temperature.gpu --format=csv > "$OUT/nvidia-smi.csv" 2>&1
for part in $PARTS; do
  case $part in
    plan)
      [ "$SMOKE" = 1 ] && { echo "plan: skipped (SMOKE: needs a card)"; continue; }
      run_part plan 30 $PY scripts/gpu_check_plan.py "$OUT/plan.json" > "$OUT/plan.log" 2>&1
      tail -2 "$OUT/plan.log" | cut -c1-400 ;;
    large)
      run_part large 200 $PY scripts/gpu_check_large.py "$OUT/large.jsonl" --part large $large_flags > "$OUT/large.log" 2>&1
      tail -3 "$OUT/large.log" | cut -c1-400 ;;
    count)
      # The counted peak against the card's at the full model, and the fused and one-pass
      # steps' time against the normal one at half depth (issue 34; 330 s: one_pass's 6 cases,
      # one more count at the full model — not yet run on a card).
      run_part count 330 $PY scripts/gpu_check_large.py "$OUT/count.jsonl" --part count $large_flags > "$OUT/count.log" 2>&1
      tail -3 "$OUT/count.log" | cut -c1-400 ;;
    compile)
      # Inductor's first compilation of the 26-layer model is most of this part.
      run_part compile 220 $PY scripts/gpu_check_large.py "$OUT/compile.jsonl" --part compile $large_flags > "$OUT/compile.log" 2>&1
      tail -4 "$OUT/compile.log" | cut -c1-400 ;;
    economical)
      [ "$SMOKE" = 1 ] && { echo "economical: skipped (SMOKE: needs a card)"; continue; }
      # Its data and run folders stay in $WORK; the two reports come to OUT (a device
      # session brings back only a few files).
      run_part economical 150 env OUT="$WORK/economical" STEPS="${STEPS:-256}" bash scripts/gpu_check_economical.sh > "$OUT/economical.log" 2>&1
      tail -4 "$OUT/economical.log"
      cp "$WORK"/economical/bench_*.json "$OUT/" 2>/dev/null ;;
    monitor)
      [ "$SMOKE" = 1 ] && { echo "monitor: skipped (SMOKE: needs a card)"; continue; }
      run_part monitor 40 $PY scripts/gpu_check_monitor.py --load-seconds 8 --bench-seconds 3 > "$OUT/monitor.json" 2> "$OUT/monitor.err" ;;
    probe)
      [ "$SMOKE" = 1 ] && { echo "probe: skipped (SMOKE: needs a card)"; continue; }
      run_part probe 180 $PY scripts/gpu_probe.py "$OUT/probe.json" > "$OUT/probe.log" 2>&1
      # The sizing model against the probe (pure arithmetic, but app/ needs platformdirs:
      # carry its wheel to a bare GPU machine; the same runs anywhere later with
      # `ternit bench sizing-gpu OUT/probe.json`).
      [ -f "$OUT/probe.json" ] && { $PY -c "import sys; from app.sizing.probe_check import main; sys.exit(main(sys.argv[1:]))" "$OUT/probe.json" || true; } ;;
    sample)
      # Generation's decode step as one CUDA graph against the eager growing cache, bf16 and
      # fp32, at the default model (issue 34, §4; ≈ 40 s; not yet run on a card). SMOKE: the
      # fixed-shape step eagerly on the CPU at a tiny shape.
      if [ "$SMOKE" = 1 ]; then
        sample_dev="--static cpu --context 32 --width 32 --heads 2 --layers 2 --vocab 300 --prompt 8 --new 16 --series 2"
        run_part sample 60 $PY -m bench.sample $sample_dev --json "$OUT/sample_static_fp32.json" > "$OUT/sample.log" 2>&1
      else
        for prec in bf16 fp32; do
          run_part "sample $prec" 40 $PY -m bench.sample --static cuda --precision $prec --new 512 --series 5 \
            --json "$OUT/sample_static_$prec.json" >> "$OUT/sample.log" 2>&1
        done
      fi
      grep "tokens agreeing" "$OUT/sample.log" | cut -c1-400 ;;
    trainer)  # bit-exact resume + the trainer step vs a plain loop + MFU (measured on an H200 already)
      run_part trainer 130 $PY scripts/gpu_check_trainer.py "$WORK/trainer" > "$OUT/trainer.log" 2>&1
      cp "$WORK/trainer/gpu_check_trainer.json" "$OUT/trainer.json" 2>/dev/null ;;
    *) echo "unknown part $part (plan large count compile economical monitor probe sample trainer)" ;;
  esac
done
echo "gpu_checks: $((SECONDS - STARTED)) s of the ${BUDGET} s budget"
