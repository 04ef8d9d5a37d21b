#!/usr/bin/env bash
# Set up (idempotent) and run the test suite; extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
# two worker processes, each test file in one (a file's module-scoped fixtures, such as
# tests/test_serve.py's server, are set up once): KAGURA_TEST_WORKERS=0 runs them in this
# process; arguments given here come last and win
exec .venv/bin/python -m pytest -q -n "${KAGURA_TEST_WORKERS:-2}" --dist loadfile "$@"
