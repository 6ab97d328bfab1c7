#!/usr/bin/env bash
# The Kotlin binding's RunnerClient under `stapel-conformance runner`:
#
#   stapel-conformance runner --report DIR -- conformance/scenarios/targets/kotlin-runner-client.sh
#
# Runs stapel.ConformanceRunnerMain (bindings-uniffi/kotlin/src/test/kotlin, a test source:
# not in the published jar), the twin of python-runner-client.py and node-runner-client.mjs,
# on the JVM with what bindings-uniffi/scripts/test leaves in bindings-uniffi/kotlin/target:
# conformance-runner/{main,test}.jar (the classes and test classes) and runner.jsa (their
# class-data-sharing archive, used when present), test.classpath (the dependencies' jars,
# written by Maven) and conformance-runner.env (the java and the cdylib folder of that
# build; JNA loads the library from there, as the tests do). The kit's STAPEL_* variables
# pass through.
#
#   kotlin-runner-client.sh --check   prints why it cannot run (exit 1), or nothing (exit 0)
#
# JVM flags for a short-lived process: C1 only (-XX:TieredStopAtLevel=1), class data
# sharing (the JDK's archive, and runner.jsa on top of it), the serial collector;
# STAPEL_KOTLIN_JAVA_OPTS adds more.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
kt=$root/bindings-uniffi/kotlin/target
build="bindings-uniffi/scripts/test"

# Sets why (what is missing; empty when the build is complete), java, lib_dir, cp and cds.
check() {
  local env_file=$kt/conformance-runner.env
  why=""
  if [ ! -f "$env_file" ] || [ ! -f "$kt/test.classpath" ] || [ ! -f "$kt/conformance-runner/test.jar" ]; then
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
  cp="$kt/conformance-runner/test.jar:$kt/conformance-runner/main.jar:$(cat "$kt/test.classpath")"
  cds=()
  if [ -f "$kt/conformance-runner/runner.jsa" ]; then
    cds=(-XX:SharedArchiveFile="$kt/conformance-runner/runner.jsa")
  fi
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
exec "$java" -XX:TieredStopAtLevel=1 -Xshare:auto "${cds[@]}" -XX:+UseSerialGC ${STAPEL_KOTLIN_JAVA_OPTS:-} \
  -Djna.library.path="$lib_dir" -cp "$cp" stapel.ConformanceRunnerMain "$@"
