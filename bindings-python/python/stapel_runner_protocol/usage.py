"""Usage accounting: provider usage shapes mapped onto the strict five-component
:class:`stapel_taskspecs.UsageSplit` (``cache_read``, ``cache_write``, ``fresh_input``,
``output``, ``thinking``) by the Rust core.

* :func:`usage_from_anthropic` — Anthropic's disjoint input counts; thinking is counted
  inside ``output_tokens`` (``output = output_tokens - thinking``);
* :func:`usage_from_openai` — OpenAI Responses / Codex CLI nested counts (cached inside
  input, reasoning inside output);
* :func:`usage_from_mapping` — any of the above, or the split itself, chosen by its keys;
  a split may be partial (absent components are 0; ``{}`` and ``None`` are zero usage),
  but only the five component names are accepted.

Invalid usage raises :class:`~stapel_runner_protocol.errors.AdapterError` with code
``invalid_usage``.
"""

from __future__ import annotations

from typing import Any

from ._native import usage_from_anthropic, usage_from_mapping, usage_from_openai

__all__ = ["usage_from_anthropic", "usage_from_openai", "usage_from_mapping"]


def __getattr__(name: str) -> Any:
    # ``usage.UsageSplit`` (0.1.1 imported it here), without importing stapel_taskspecs
    # before a usage is mapped.
    if name == "UsageSplit":
        from stapel_taskspecs import UsageSplit

        return UsageSplit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
