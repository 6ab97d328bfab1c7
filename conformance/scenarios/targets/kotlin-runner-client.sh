#!/usr/bin/env bash
# The Kotlin binding's RunnerClient under `stapel-conformance runner`:
#
#   stapel-conformance runner --report DIR -- conformance/scenarios/targets/kotlin-runner-client.sh
#
# Runs stapel.ConformanceRunnerMain (bindings-uniffi/kotlin/src/test/kotlin, a test source:
# not in the published jar), the twin of python-runner-client.py and node-runner-client.mjs,
# on the JVM with what bindings-uniffi/scripts/test leaves in bindings-uniffi/kotlin/target:
# classes/ and test-classes/, test.classpath (the jars, written by Maven) and
# conformance-runner.env (the java and the cdylib folder of that build; JNA loads the
# library from there, as the tests do). The kit's STAPEL_* variables pass through.
#
#   kotlin-runner-client.sh --check   prints why it cannot run (exit 1), or nothing (exit 0)
#
# JVM flags for a short-lived process: C1 only (-XX:TieredStopAtLevel=1), the JDK's class
# data sharing archive (-Xshare:auto), the serial collector; STAPEL_KOTLIN_JAVA_OPTS adds more.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
kt=$root/bindings-uniffi/kotlin/target
build="bindings-uniffi/scripts/test"

# Sets why (what is missing; empty when the build is complete), java, lib_dir and cp.
check() {
  local env_file=$kt/conformance-runner.env
  why=""
  if [ ! -f "$env_file" ] || [ ! -f "$kt/test.classpath" ] \
    || [ ! -f "$kt/test-classes/stapel/ConformanceRunnerMain.class" ] || [ ! -d "$kt/classes/dev" ]; then
    why="no Kotlin build in $kt (run $build)"
    return
  fi
  java=$(sed -n 's/^java=//p' "$env_file")
  lib_dir=$(sed -n 's/^lib_dir=//p' "$env_file")
  if [ ! -x "$java" ]; then
    why="the java of the Kotlin build ($java, $env_file) is gone (run $build)"
  elif [ ! -f "$lib_dir/libstapel_runner_protocol_uniffi.so" ]; then
    why="no cdylib at $lib_dir/libstapel_runner_protocol_uniffi.so (run $build)"
  fi
  cp="$kt/test-classes:$kt/classes:$(cat "$kt/test.classpath")"
}

check
if [ "${1:-}" = --check ]; then
  [ -z "$why" ] || { echo "$why"; exit 1; }
  exit 0
fi
if [ -n "$why" ]; then
  echo "kotlin-runner-client: $why" >&2
  exit 2
fi
# shellcheck disable=SC2086 # STAPEL_KOTLIN_JAVA_OPTS is a list of flags
exec "$java" -XX:TieredStopAtLevel=1 -Xshare:auto -XX:+UseSerialGC ${STAPEL_KOTLIN_JAVA_OPTS:-} \
  -Djna.library.path="$lib_dir" -cp "$cp" stapel.ConformanceRunnerMain "$@"
