#!/bin/sh
# The Rust runner (`stapel-runner connect`) under `stapel-conformance runner`:
#   stapel-conformance runner --report DIR -- conformance/scenarios/targets/rust-runner.sh [STAPEL_RUNNER]
# maps the kit's STAPEL_* variables to the runner's flags and runs the conformance
# workload through harness.sh (rein `subprocess`, the kit's default invocation). Short
# keepalive and reconnect timings keep the run quick; they are this target's settings,
# not the protocol's.
here=$(cd "$(dirname "$0")" && pwd)
runner=${1:-${STAPEL_RUNNER:-stapel-runner}}
exec "$runner" connect --url "$STAPEL_HUB_URL" --token-file "$STAPEL_TOKEN_FILE" \
  --state-dir "$STAPEL_STATE_DIR" \
  --jsonl-harness sh --jsonl-harness "$here/harness.sh" \
  --max-tasks 2 --cancel-boundary-ms 300 --grace-ms 200 \
  --session-config '{"ping_interval_ms":500,"peer_timeout_ms":1500}' \
  --backoff-initial-ms 50 --backoff-max-ms 300
