#!/usr/bin/env bash
# graphcheck's quick start. Each command makes (or reuses) ./.venv and installs what it needs.
#   ./dev.sh run [graphcheck run options]   decode-check the built-in scenarios on the default backend
#   ./dev.sh test [pytest options]          the whole test suite (GPU tests skip without a GPU);
#                                           ./dev.sh test -m "not slow" is the fast layer
set -euo pipefail
cd "$(dirname "$0")"

PY=${PYTHON:-python3}
VENV=.venv
# torch is pinned to a CPU build: a bare or open-ended torch requirement pulls a multi-GB CUDA build.
TORCH_PIN=${GRAPHCHECK_TORCH_PIN:-torch==2.13.0}
# The test suite also runs the engine through PaddlePaddle (CPU build) for the xpu --emulate path.
PADDLE_PIN=${GRAPHCHECK_PADDLE_PIN:-paddlepaddle==3.3.1}

# install LABEL STAMP_INPUT COMMAND...: run the pip COMMAND unless .venv/.graphcheck-LABEL already records
# STAMP_INPUT, so alternating `run` and `test` installs nothing twice.
install() {
    local label=$1 want=$2
    shift 2
    local stamp="$VENV/.graphcheck-$label"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        "$VENV/bin/python" -m pip install -q "$@"
        echo "$want" >"$stamp"
    fi
}

setup() {  # setup [test]: the tool (torch, graphcheck), plus for `test` its test extras and paddle
    if [ ! -x "$VENV/bin/python" ]; then
        "$PY" -m venv "$VENV"
        "$VENV/bin/python" -m pip install -q --upgrade pip
    fi
    local project
    project="$(sha1sum pyproject.toml | cut -d' ' -f1)"
    install torch "$TORCH_PIN" "$TORCH_PIN"
    if [ "${1:-}" = test ]; then
        install project "$project test" -e '.[test]'
        install paddle "$PADDLE_PIN" "$PADDLE_PIN"
    else
        # `run` needs only the tool; a venv that already has the test extras keeps them.
        local have
        have="$(cat "$VENV/.graphcheck-project" 2>/dev/null || true)"
        if [ "$have" != "$project test" ]; then
            install project "$project" -e .
        fi
    fi
}

cmd=${1:-}
shift || true
case "$cmd" in
    run)
        setup run
        exec "$VENV/bin/graphcheck" run "$@"
        ;;
    test)
        setup test
        export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}
        # One pytest-xdist worker per core (at most 8); GRAPHCHECK_TEST_WORKERS=0 runs in one process.
        # Each worker computes on one thread (torch's and OpenMP's): a second thread per worker only
        # oversubscribes the cores, and the catalog test's time budgets suffer from it.
        export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
        exec "$VENV/bin/python" -m pytest -n "${GRAPHCHECK_TEST_WORKERS:-auto}" --maxprocesses=8 "$@"
        ;;
    *)
        echo "usage: ./dev.sh run [options] | ./dev.sh test [pytest options]" >&2
        exit 2
        ;;
esac
