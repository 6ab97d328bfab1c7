"""Usage accounting: provider usage shapes mapped onto the strict five-component
:class:`stapel_taskspecs.UsageSplit` (``cache_read``, ``cache_write``, ``fresh_input``,
``output``, ``thinking``) by the Rust core.

* :func:`usage_from_anthropic` — Anthropic's disjoint input counts; thinking is counted
  inside ``output_tokens`` (``output = output_tokens - thinking``);
* :func:`usage_from_openai` — OpenAI Responses / Codex CLI nested counts (cached inside
  input, reasoning inside output);
* :func:`usage_from_mapping` — any of the above, or the split itself, chosen by its keys.

Invalid usage raises :class:`~stapel_runner_protocol.errors.AdapterError` with code
``invalid_usage``.
"""

from __future__ import annotations

from ._native import usage_from_anthropic, usage_from_mapping, usage_from_openai

__all__ = ["usage_from_anthropic", "usage_from_openai", "usage_from_mapping"]
