package stapel

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.NullNode
import dev.stapel.runnerprotocol.*

/** Area `framing`: the bounded JSONL line framer. */
object FramingRunner {
    private fun item(l: FramedLine): JsonNode = when (l) {
        is FramedLine.Line -> Json.obj().put("line", l.text)
        is FramedLine.Error -> Json.obj().put("error", l.code).set("line_number", l.lineNumber?.let { Json.of(it.toLong()) } ?: NullNode.instance)
    }

    private fun drain(f: LineFramer, out: MutableList<JsonNode>) {
        while (true) out.add(item(f.pollLine() ?: return))
    }

    fun run(vector: JsonNode) {
        val cfg = vector.get("config") ?: Json.obj()
        val framer = LineFramer(
            LineFramerConfig(
                maxLineBytes = cfg.ulong("max_line_bytes"),
                skipEmptyLines = cfg.get("skip_empty_lines")?.asBoolean(),
                maxReadyLines = cfg.ulong("max_ready_lines"),
                maxReadyBytes = cfg.ulong("max_ready_bytes"),
            ),
        )
        vector.get("steps").forEachIndexed { i, step ->
            val input = step.get("input")
            val expect = step.get("expect")
            val output = mutableListOf<JsonNode>()
            var error: JsonNode = NullNode.instance
            var accepted: JsonNode = NullNode.instance
            val drainAfter = input.get("drain")?.asBoolean() ?: true
            val push = bytesOf(input, "push")
            val pushAll = bytesOf(input, "push_all")
            if (push != null) {
                if (!drainAfter) {
                    try {
                        accepted = Json.of(framer.push(push).toLong())
                    } catch (e: ProtocolException.State) {
                        error = Json.of(e.code)
                    }
                } else {
                    val size = input.get("chunk_size")?.asInt() ?: 0
                    val chunk = if (size <= 0) maxOf(push.size, 1) else size
                    var start = 0
                    chunks@ while (start < push.size) {
                        var rest = push.copyOfRange(start, minOf(start + chunk, push.size))
                        start += chunk
                        while (true) {
                            val n = try {
                                framer.push(rest).toInt()
                            } catch (e: ProtocolException.State) {
                                error = Json.of(e.code)
                                break@chunks
                            }
                            drain(framer, output)
                            rest = rest.copyOfRange(n, rest.size)
                            if (rest.isEmpty()) break
                            if (n == 0) fail(i, "push into a drained framer took nothing")
                        }
                    }
                }
            } else if (pushAll != null) {
                try {
                    framer.pushAll(pushAll).forEach { output.add(item(it)) }
                } catch (e: ProtocolException.State) {
                    error = Json.of(e.code)
                }
            } else if (input.has("pull")) {
                drain(framer, output)
            } else if (input.has("finish")) {
                framer.finish()
                drain(framer, output)
            } else {
                fail(i, "unknown input ${Json.text(input)}")
            }
            check(i, "output", Json.of(output), expect.get("output") ?: Json.arr())
            check(i, "error", error, expect.get("error") ?: NullNode.instance)
            expect.get("accepted")?.let { check(i, "accepted", accepted, it) }
            expect.get("ready")?.let { check(i, "ready", Json.of(framer.readyLen().toLong()), it) }
            expect.get("buffered_bytes")?.let { check(i, "buffered_bytes", Json.of(framer.bufferedBytes().toLong()), it) }
        }
    }
}
