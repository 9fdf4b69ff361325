#!/usr/bin/env bash
# The GPU checks behind the figures in the issue notes: run from the repository root on a
# machine with a CUDA device, torch, hypothesis, pytest, pytest-benchmark, rich and jinja2.
#   benchmarks/gpu_checks.sh OUT_DIR [PROFILE]
# GPU_CHECKS_TESTS selects the pytest run (default: the whole tests/ folder).
# GPU_CHECKS_PARTS picks the parts (default "tests bench run faults"; "catalog" is extra);
# GPU_CHECKS_PARTS=bench runs only `graphcheck bench --backend cuda` (decode step per bucket, lockstep
# overhead vs its target), with GPU_CHECKS_BENCH_ARGS (e.g. --quick). "catalog" runs `graphcheck
# catalog --backend cuda` with GPU_CHECKS_CATALOG_BUDGET seconds per fault (default 30).
# GPU_CHECKS_SETUP_ARGS goes to run, catalog and the fault runs (e.g. "--model bfloat16 --contract fastdeploy").
# Writes pytest logs, benchmark JSON and graphcheck reports under OUT_DIR.
set -uo pipefail
out=${1:?usage: benchmarks/gpu_checks.sh OUT_DIR [PROFILE]}
profile=${2:-ci}
mkdir -p "$out"
wants() { [[ " ${GPU_CHECKS_PARTS:-tests bench run faults} " == *" $1 "* ]]; }
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=ci
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c 'import torch; print("torch", torch.__version__)' | tee -a "$out/gpu.txt"

if wants tests; then
echo "== tests (CUDA tests included)"
python3 -m pytest ${GPU_CHECKS_TESTS:-tests} -q -p no:warnings -p no:cacheprovider 2>&1 | tail -n 15 | tee "$out/tests.txt"
fi

if wants bench; then
echo "== graphcheck bench --backend cuda (JSON in $out/bench/)"
python3 -m graphcheck.cli bench --backend cuda ${GPU_CHECKS_BENCH_ARGS:-} --out "$out/bench" 2>&1 | tee "$out/bench.txt"
echo "exit ${PIPESTATUS[0]}" | tee -a "$out/bench.txt"
fi

if wants run; then
echo "== graphcheck run --backend cuda --profile $profile"
python3 -m graphcheck.cli run --backend cuda ${GPU_CHECKS_SETUP_ARGS:-} --profile "$profile" --report-dir "$out/reports" --quiet 2>&1 \
    | tail -n 25 | tee "$out/run-clean.txt"
echo "exit ${PIPESTATUS[0]}" | tee -a "$out/run-clean.txt"
fi
if wants catalog; then
echo "== graphcheck catalog --backend cuda"
python3 -m graphcheck.cli catalog --backend cuda ${GPU_CHECKS_SETUP_ARGS:-} --budget "${GPU_CHECKS_CATALOG_BUDGET:-30}" --shrink-budget 10 \
    --report-dir "$out/catalog" 2>&1 | tail -n 45 | tee "$out/catalog.txt"
echo "exit ${PIPESTATUS[0]}" | tee -a "$out/catalog.txt"
fi
fault_profile=${GPU_CHECKS_FAULT_PROFILE:-$profile}
wants faults || exit 0
for fault in $(python3 -c 'from graphcheck.backends.engine.faults import FAULTS; print(" ".join(sorted(FAULTS)))'); do
    echo "== graphcheck run --backend cuda --inject $fault"
    python3 -m graphcheck.cli run --backend cuda ${GPU_CHECKS_SETUP_ARGS:-} --profile "$fault_profile" --inject "$fault" \
        --report-dir "$out/reports-$fault" --quiet 2>&1 | grep -E "DIVERGENCE|CLEAN|suite |where:" | tee "$out/run-$fault.txt"
    echo "exit ${PIPESTATUS[0]}" | tee -a "$out/run-$fault.txt"
done
