"""Reference harness adapter: one persistent claude-agent-sdk session per task.

``claude-agent-sdk`` is optional (``pip install "stapel-runner-protocol[agent-sdk]"``):
this module imports without it, and :class:`AgentSdkAdapter` raises
:class:`~stapel_runner_protocol.errors.AdapterUnavailableError` only when it has to
build a real client. Inject ``client_factory`` (``role_spec -> client``) to test or to
wire a custom client: any object with the async methods ``connect()``,
``query(prompt)``, ``receive_response()`` (an async iterator of messages) and
``disconnect()`` — the shape of ``claude_agent_sdk.ClaudeSDKClient``.

A turn's text blocks and its final result message's usage are folded by the Rust core
(``AgentTurn``: the text is every text block joined in order; no result usage is zero
usage); recognising the SDK's message and block objects stays here. The SDK is async; each
session drives its client on a private event loop in a background thread, so
:meth:`AgentSdkSession.turn` is an ordinary blocking call.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Dict, List, Optional

from . import _native
from .adapters import HarnessAdapter, RoleSpec, Session, TurnResult, _require_taskspecs
from .errors import AdapterError, AdapterUnavailableError
from ._native import usage_from_anthropic

__all__ = [
    "AdapterUnavailableError",
    "AgentSdkAdapter",
    "AgentSdkSession",
    "ClientFactory",
    "agent_options",
    "build_agent_options",
    "extract_text",
    "extract_usage",
    "turn_text",
    "turn_usage",
    "usage_from_anthropic",
]

#: ``role_spec -> async client`` (see the module docs).
ClientFactory = Callable[[RoleSpec], Any]

_MISSING = (
    "claude-agent-sdk is not installed; "
    'install it with: pip install "stapel-runner-protocol[agent-sdk]"'
)


def _is_final(message: Any) -> bool:
    """The SDK ends every response with a ``ResultMessage`` (it carries the usage and
    the cost)."""
    return type(message).__name__ == "ResultMessage" or hasattr(message, "total_cost_usd")


def _text_blocks(messages: List[Any]) -> List[str]:
    """Every text block of every message, in order (SDK objects: ``content`` blocks
    with a string ``text``)."""
    return [
        text
        for message in messages
        for block in getattr(message, "content", None) or []
        for text in [getattr(block, "text", None)]
        if isinstance(text, str)
    ]


def _result_usage(messages: List[Any]) -> Any:
    """The usage of the first result message, or ``None`` (no result message, or one
    without usage)."""
    for message in messages:
        if _is_final(message):
            return getattr(message, "usage", None)
    return None


def turn_text(messages: List[Any]) -> str:
    """The text of a turn: every text block of every message, in order (the core's
    ``AgentTurn`` fold)."""
    text: str = _native.agent_turn(_text_blocks(messages))[0]
    return text


def turn_usage(messages: List[Any]) -> Any:
    """The usage of a turn as a ``stapel_taskspecs.UsageSplit``: the final result
    message's usage (Anthropic-shaped), all zeros when there is none (the core's
    ``AgentTurn`` fold)."""
    return _native.agent_turn([], _result_usage(messages))[1]


def extract_text(messages: List[Any]) -> str:
    """The assistant text of a turn's messages: every text block, in order, joined with
    no separator (stapel-runner-protocol 0.1.1's name for :func:`turn_text`)."""
    return turn_text(messages)


def extract_usage(messages: List[Any]) -> Any:
    """The usage of a turn's messages as a ``stapel_taskspecs.UsageSplit``: the first
    result message's (Anthropic-shaped) usage, all zeros without one (stapel-runner-protocol
    0.1.1's name for :func:`turn_usage`)."""
    return turn_usage(messages)


def agent_options(role_spec: RoleSpec) -> Dict[str, Any]:
    """The ``ClaudeAgentOptions`` keyword arguments for a role, chosen by the Rust core
    (``AgentOptions``): ``model`` (when set), ``allowed_tools`` (when any),
    ``system_prompt`` (the role's inline prompt), ``env`` (``ANTHROPIC_BASE_URL`` = the
    LLM gateway URL, when set) and the budget's ``max_turns`` / ``max_budget_usd``."""
    # The dataclass field is the explicit inline prompt (the core gives it precedence).
    return _native.agent_options(role_spec.to_dict(), role_spec.system_prompt)


def build_agent_options(role_spec: RoleSpec) -> Any:
    """``claude_agent_sdk.ClaudeAgentOptions`` for a role (see :func:`agent_options`)."""
    try:
        from claude_agent_sdk import (  # type: ignore[import-not-found, unused-ignore]
            ClaudeAgentOptions,
        )
    except ImportError as exc:
        raise _native.host_adapter_error("adapter_unavailable", _MISSING) from exc
    return ClaudeAgentOptions(**agent_options(role_spec))


def _sdk_client(role_spec: RoleSpec) -> Any:
    try:
        from claude_agent_sdk import (  # type: ignore[import-not-found, unused-ignore]
            ClaudeSDKClient,
        )
    except ImportError as exc:
        raise _native.host_adapter_error("adapter_unavailable", _MISSING) from exc
    return ClaudeSDKClient(options=build_agent_options(role_spec))


class _Loop:
    """A private event loop on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="agent-sdk-session", daemon=True
        )
        self.thread.start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class AgentSdkSession(Session):
    """A persistent SDK session: every :meth:`turn` appends to the same conversation."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._loop = _Loop()
        self._closed = False
        try:
            self._loop.run(client.connect())
        except Exception as exc:
            self._closed = True
            self._loop.stop()
            raise _native.host_adapter_error("connect_failed", str(exc)) from exc

    @property
    def closed(self) -> bool:
        """``True`` once :meth:`close` ran (or a fault closed the session)."""
        return self._closed

    @property
    def client(self) -> Any:
        """The SDK client."""
        return self._client

    def turn(self, prompt: str) -> TurnResult:
        """Send ``prompt`` and collect the response up to its result message. An
        exception of the client (the SDK's own) propagates as it is, as in
        stapel-runner-protocol 0.1.1; the session stays open."""
        if self._closed:
            raise AdapterError("turn() on a closed agent-sdk session", code="session_closed")
        messages: List[Any] = self._loop.run(self._exchange(prompt))
        text, usage = _native.agent_turn(_text_blocks(messages), _result_usage(messages))
        return TurnResult(text=text, usage=usage, raw=messages)

    async def _exchange(self, prompt: str) -> List[Any]:
        await self._client.query(prompt)
        messages: List[Any] = []
        async for message in self._client.receive_response():
            messages.append(message)
            if _is_final(message):
                break
        return messages

    def close(self) -> None:
        """Disconnect the client and stop the loop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._client.disconnect())
        except Exception:
            pass
        finally:
            self._loop.stop()


class AgentSdkAdapter(HarnessAdapter):
    """Opens a persistent claude-agent-sdk session per role (see the module docs).
    Without ``stapel-taskspecs`` (a dependency; missing only from a broken install) the constructor raises
    :class:`~stapel_runner_protocol.errors.AdapterUnavailableError`
    (``taskspecs_unavailable``): its turns' usage is a ``stapel_taskspecs.UsageSplit``."""

    def __init__(self, *, client_factory: Optional[ClientFactory] = None) -> None:
        _require_taskspecs("AgentSdkAdapter")
        self._client_factory: ClientFactory = client_factory or _sdk_client
        self._sessions: List[AgentSdkSession] = []

    def open_session(self, role_spec: RoleSpec) -> AgentSdkSession:
        """Build a client for ``role_spec`` and connect it."""
        session = AgentSdkSession(self._client_factory(role_spec))
        # Keep only the sessions still open: an adapter that outlives many sessions
        # (one per Gateway run) does not hold on to every closed one.
        self._sessions = [s for s in self._sessions if not s.closed]
        self._sessions.append(session)
        return session

    def close(self) -> None:
        """Close every session this adapter opened. Idempotent."""
        sessions, self._sessions = self._sessions, []
        for s in sessions:
            s.close()
