#!/bin/sh
# The conformance workload as a subprocess JSONL harness (seed 000's SubprocessAdapter
# protocol: one {"type":"turn",...,"prompt":...} line in, events and one result out).
# The prompt is the task's goal: "conformance quick N" emits N state events and finishes,
# "conformance hold" emits one and then waits until it is stopped (cancel, shutdown).
read line
case "$line" in
*'conformance hold'*)
  echo '{"type":"state","state":"holding"}'
  exec sleep 600;;
*)
  n=$(printf '%s' "$line" | sed -n 's/.*conformance quick \([0-9][0-9]*\).*/\1/p')
  n=${n:-3}
  i=0
  while [ "$i" -lt "$n" ]; do
    echo "{\"type\":\"state\",\"state\":\"step $i\"}"
    i=$((i + 1))
  done
  echo '{"type":"result","text":"ok","usage":{"input_tokens":1,"output_tokens":1}}'
  read more;;
esac
