#!/usr/bin/env bash
# graphcheck's quick start. Each command makes (or reuses) ./.venv and installs what it needs.
#   ./dev.sh run [graphcheck run options]   decode-check the built-in scenarios on the default backend
#   ./dev.sh test [pytest options]          the whole test suite (GPU tests skip without a GPU)
set -euo pipefail
cd "$(dirname "$0")"

PY=${PYTHON:-python3}
VENV=.venv
# torch is pinned to a CPU build: a bare or open-ended torch requirement pulls a multi-GB CUDA build.
TORCH_PIN=${GRAPHCHECK_TORCH_PIN:-torch==2.13.0}
# The test suite also runs the engine through PaddlePaddle (CPU build) for the xpu --emulate path.
PADDLE_PIN=${GRAPHCHECK_PADDLE_PIN:-paddlepaddle==3.3.1}

setup() {
    local extra=${1:-}
    if [ ! -x "$VENV/bin/python" ]; then
        "$PY" -m venv "$VENV"
    fi
    local stamp="$VENV/.graphcheck-installed"
    local want
    want="$(cat pyproject.toml dev.sh | sha1sum | cut -d' ' -f1) $TORCH_PIN $extra"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        "$VENV/bin/python" -m pip install -q --upgrade pip
        "$VENV/bin/python" -m pip install -q "$TORCH_PIN"
        "$VENV/bin/python" -m pip install -q -e '.[test]'
        if [ -n "$extra" ]; then
            "$VENV/bin/python" -m pip install -q "$extra"
        fi
        echo "$want" >"$stamp"
    fi
}

cmd=${1:-}
shift || true
case "$cmd" in
    run)
        setup
        exec "$VENV/bin/graphcheck" run "$@"
        ;;
    test)
        setup "$PADDLE_PIN"
        export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}
        exec "$VENV/bin/python" -m pytest "$@"
        ;;
    *)
        echo "usage: ./dev.sh run [options] | ./dev.sh test [pytest options]" >&2
        exit 2
        ;;
esac
