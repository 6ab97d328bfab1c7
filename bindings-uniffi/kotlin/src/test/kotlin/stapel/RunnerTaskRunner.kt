package stapel

import com.fasterxml.jackson.databind.JsonNode
import dev.stapel.runnerprotocol.*

/**
 * Area `runner_task`: the connected runner's task policy, one `runnerTaskCall` per step
 * (`expect.result` or `expect.error`, exactly one).
 */
object RunnerTaskRunner {
    fun run(vector: JsonNode) {
        vector.get("steps").forEachIndexed { i, step ->
            val expect = step.get("expect")
            val want = expect.get("result")
            val wantError = expect.get("error")
            if ((want == null) == (wantError == null)) fail(i, "expect needs exactly one of result/error")
            val got = try {
                runnerTaskCall(Json.text(step.get("input")))
            } catch (e: ProtocolException.State) {
                if (wantError == null) fail(i, "unexpected error ${e.code}: ${e.detail}")
                check(i, "error", Json.of(e.code), wantError)
                return@forEachIndexed
            }
            if (wantError != null) fail(i, "expected error ${Json.text(wantError)}, got $got")
            check(i, "result", Json.parse(got), want)
        }
    }
}
