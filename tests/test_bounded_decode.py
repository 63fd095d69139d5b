"""Every decoder is bounded and typed (architecture §2 "Wire formats"): JSON nested deeper than 256
levels, a line or event larger than 8 MiB, or a field of the wrong JSON type is a
StreamProtocolError, never a RecursionError/TypeError, in the four stream reducers, their
blocking folds and over the wire; and a stream and a blocking call of one answer fold equal."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from providers.anthropic_decode import AnthropicStreamReducer
from providers.anthropic_messages import AnthropicMessagesProvider
from providers.base import ChatMessage, ChatRequest, fold
from providers.bounded_json import MAX_FRAME_BYTES, MAX_JSON_DEPTH, parse_json
from providers.errors import StreamProtocolError
from providers.events import Final
from providers.http_provider import HttpModelProvider
from providers.ollama_chat import OllamaChatProvider
from providers.ollama_decode import OllamaStreamReducer
from providers.openai_chat import OpenAIChatProvider
from providers.openai_chat_decode import ChatCompletionsStreamReducer
from providers.openai_responses import OpenAIResponsesProvider
from providers.responses_decode import ResponsesStreamReducer
from providers.stream_reducer import StreamReducer, reduce_body
from tests.peers.provider_server import Reply
from tests.stream_helpers import collect, config, every_split, served, text
from tests.test_architecture import IO_MODULES, REPO, imported_modules

REDUCERS: dict[str, Callable[[], StreamReducer]] = {
    "openai_chat": ChatCompletionsStreamReducer,
    "openai_responses": ResponsesStreamReducer,
    "anthropic": AnthropicStreamReducer,
    "ollama": OllamaStreamReducer,
}
DEEP = "[" * 100_000
"""The field case: a RecursionError in every decoder before the bound."""


def frame(kind: str, data: str) -> bytes:
    """One frame of ``kind``'s wire format: an SSE event, or an NDJSON line for Ollama."""
    return f"{data}\n".encode() if kind == "ollama" else f"data: {data}\n\n".encode()


def first_text(kind: str) -> str:
    """A frame carrying the text ``Hi`` in ``kind``'s format."""
    return {
        "openai_chat": '{"choices":[{"index":0,"delta":{"content":"Hi"}}]}',
        "openai_responses": '{"type":"response.output_text.delta","delta":"Hi"}',
        "anthropic": '{"type":"content_block_delta","index":0,'
        '"delta":{"type":"text_delta","text":"Hi"}}',
        "ollama": '{"message":{"role":"assistant","content":"Hi"},"done":false}',
    }[kind]


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# -- the bounded parse -------------------------------------------------------------------------


def test_nesting_up_to_the_limit_parses_and_one_level_more_is_a_protocol_error() -> None:
    assert parse_json(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(StreamProtocolError, match="nested deeper than 256"):
        parse_json(nested(MAX_JSON_DEPTH + 1))
    with pytest.raises(StreamProtocolError, match="nested deeper than 256"):
        parse_json(DEEP)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = json.dumps({"a": ["[[[{{{" * 100, '\\"[' * 300]})
    assert parse_json(text)["a"][0].startswith("[[[")


def test_many_shallow_brackets_are_not_deep() -> None:
    text = json.dumps([[i] for i in range(5000)])
    assert len(parse_json(text)) == 5000


def test_text_larger_than_8_mib_is_a_protocol_error() -> None:
    with pytest.raises(StreamProtocolError, match="larger than"):
        parse_json('"' + "x" * MAX_FRAME_BYTES + '"')
    with pytest.raises(StreamProtocolError, match="larger than"):
        parse_json(b" " * (MAX_FRAME_BYTES + 1))


# -- the four reducers -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(REDUCERS))
def test_deep_nesting_is_a_protocol_error_after_the_text_before_it(kind: str) -> None:
    body = frame(kind, first_text(kind)) + frame(kind, DEEP)
    events, failure = reduce_body(REDUCERS[kind](), [body])
    assert events == [text("Hi")]
    assert isinstance(failure, StreamProtocolError)
    assert "nested deeper than 256" in failure.message


@pytest.mark.parametrize("kind", sorted(REDUCERS))
def test_deep_nesting_inside_a_field_is_a_protocol_error(kind: str) -> None:
    data = json.dumps({"type": "ping", "x": json.loads(nested(MAX_JSON_DEPTH))})
    _, failure = reduce_body(REDUCERS[kind](), [frame(kind, data)])
    assert isinstance(failure, StreamProtocolError), failure


@pytest.mark.parametrize("kind", sorted(REDUCERS))
def test_deep_nesting_in_a_blocking_answer_is_a_protocol_error(kind: str) -> None:
    with pytest.raises(StreamProtocolError):
        REDUCERS[kind]().answer(parse_json(DEEP))


@pytest.mark.parametrize("kind", sorted(REDUCERS))
def test_a_line_larger_than_8_mib_is_a_protocol_error(kind: str) -> None:
    big = frame(kind, '{"pad": "' + "x" * MAX_FRAME_BYTES + '"}')
    events, failure = reduce_body(REDUCERS[kind](), [frame(kind, first_text(kind)), big])
    assert events == [text("Hi")]
    assert isinstance(failure, StreamProtocolError)
    assert "larger than 8388608 bytes" in failure.message


WRONG_TYPES = [
    ("openai_responses", '{"type": []}'),
    ("openai_responses", '{"type": {"a": 1}}'),
    ("openai_responses", '{"type": "response.output_item.added", "item": {"type": "function_call",'
     ' "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{}"}}\n\ndata: '
     '{"type": "response.completed", "response": {"output": 7}}'),
    ("anthropic", '{"type": []}'),
    ("anthropic", '{"type": "content_block_delta", "index": 0, "delta": {"type": 5}}'),
    ("anthropic", '{"type": "content_block_start", "index": [], "content_block": {}}'),
    ("anthropic", '{"type": "content_block_start", "index": 0, "content_block": '
     '{"type": "tool_use", "id": "t"}}\n\ndata: {"type": "content_block_stop", "index": 0}'),
    ("ollama", '{"message": {"tool_calls": 5}}'),
    ("ollama", '{"message": {"tool_calls": [{"function": {"name": "f", "arguments": [1]}}]}}'),
    ("openai_chat", '{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, '
     '"function": {"name": ["f"], "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]}'),
]  # fmt: skip
WIRE_WRONG_TYPES = {
    "openai_chat": WRONG_TYPES[-1][1],
    "openai_responses": '{"type": []}',
    "anthropic": '{"type": []}',
    "ollama": '{"message": {"tool_calls": 5}}',
}


@pytest.mark.parametrize(("kind", "data"), WRONG_TYPES)
def test_a_field_of_the_wrong_json_type_is_a_protocol_error_at_every_split(
    kind: str, data: str
) -> None:
    body = frame(kind, first_text(kind)) + frame(kind, data)
    for chunks in every_split(body):
        events, failure = reduce_body(REDUCERS[kind](), chunks)
        assert events == [text("Hi")], chunks
        assert isinstance(failure, StreamProtocolError), (chunks, failure)


# -- stream and blocking fold equal, by construction -------------------------------------------

CALL_ARGS = {"city": "Paris", "days": [1, 2]}


def _chat() -> tuple[bytes, Any]:
    chunks = [
        {"choices": [{"index": 0, "delta": {"reasoning_content": "think", "content": "Hel"}}]},
        {"choices": [{"index": 0, "delta": {"content": "lo"}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"city": '}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": '"Paris", "days": [1, 2]}'}},
            {"index": 1, "id": "c2", "function": {"name": "g", "arguments": ""}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 5}},
    ]  # fmt: skip
    body = b"".join(frame("openai_chat", json.dumps(c)) for c in chunks)
    body += frame("openai_chat", "[DONE]")
    message = {
        "role": "assistant",
        "content": "Hello",
        "reasoning_content": "think",
        "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "f", "arguments": '{"city": "Paris", "days": [1, 2]}'}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": ""}},
        ],
    }  # fmt: skip
    answer = {
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 5},
    }
    return body, answer


def _responses() -> tuple[bytes, Any]:
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
        {"type": "message", "id": "m1", "role": "assistant",
         "content": [{"type": "output_text", "text": "Hello"}]},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f",
         "arguments": json.dumps(CALL_ARGS), "status": "completed"},
    ]  # fmt: skip
    response = {
        "status": "completed",
        "output": output,
        "usage": {"input_tokens": 7, "output_tokens": 5},
    }
    events = [
        {"type": "response.reasoning_summary_text.delta", "delta": "think"},
        {"type": "response.output_text.delta", "delta": "Hel"},
        {"type": "response.output_text.delta", "delta": "lo"},
        {"type": "response.output_item.added", "item": {**output[2], "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{}"},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1",
         "arguments": json.dumps(CALL_ARGS)},
        {"type": "response.output_item.done", "item": output[2]},
        {"type": "response.completed", "response": response},
    ]  # fmt: skip
    return b"".join(frame("openai_responses", json.dumps(e)) for e in events), response


def _anthropic() -> tuple[bytes, Any]:
    content = [
        {"type": "thinking", "thinking": "think", "signature": "sig"},
        {"type": "text", "text": "Hello"},
        {"type": "tool_use", "id": "c1", "name": "f", "input": CALL_ARGS},
    ]
    usage = {"input_tokens": 4, "cache_read_input_tokens": 3, "output_tokens": 5}
    events = [
        {"type": "message_start", "message": {"usage": {**usage, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "think"}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2,
         "content_block": {"type": "tool_use", "id": "c1", "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": 2,
         "delta": {"type": "input_json_delta", "partial_json": json.dumps(CALL_ARGS)}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]  # fmt: skip
    message = {"type": "message", "content": content, "stop_reason": "tool_use", "usage": usage}
    return b"".join(frame("anthropic", json.dumps(e)) for e in events), message


def _ollama() -> tuple[bytes, Any]:
    call = {"function": {"name": "f", "arguments": CALL_ARGS}}
    records = [
        {"message": {"role": "assistant", "content": "", "thinking": "think"}, "done": False},
        {"message": {"role": "assistant", "content": "Hel"}, "done": False},
        {"message": {"role": "assistant", "content": "lo"}, "done": False},
        {"message": {"role": "assistant", "content": "", "tool_calls": [call]}, "done": False},
        {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
         "prompt_eval_count": 7, "eval_count": 5},
    ]  # fmt: skip
    answer = {
        "message": {"role": "assistant", "content": "Hello", "thinking": "think",
                    "tool_calls": [call]},
        "done": True, "done_reason": "stop", "prompt_eval_count": 7, "eval_count": 5,
    }  # fmt: skip
    return b"".join(frame("ollama", json.dumps(r)) for r in records), answer


ANSWERS = {"openai_chat": _chat, "openai_responses": _responses, "anthropic": _anthropic,
           "ollama": _ollama}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(ANSWERS))
def test_a_stream_and_the_blocking_answer_of_it_fold_equal(kind: str) -> None:
    body, answer = ANSWERS[kind]()
    streaming = REDUCERS[kind]()
    events, failure = reduce_body(streaming, [body])
    assert failure is None
    blocking = REDUCERS[kind]()
    blocked = blocking.answer(answer)
    streamed = fold(events)
    assert streamed == fold(blocked)
    assert (streamed.text, streamed.reasoning) == ("Hello", "think")
    assert json.loads(streamed.tool_calls[0].arguments) == CALL_ARGS
    assert streamed.usage is not None and streamed.usage.output_tokens == 5
    assert streaming.provider_items == blocking.provider_items
    assert isinstance(events[-1], Final) and isinstance(blocked[-1], Final)


# -- over the wire: the typed error reaches the caller -----------------------------------------

PROVIDERS: dict[str, tuple[type[HttpModelProvider], str, str]] = {
    "openai_chat": (OpenAIChatProvider, "/v1", "/v1/chat/completions"),
    "openai_responses": (OpenAIResponsesProvider, "/v1", "/v1/responses"),
    "anthropic": (AnthropicMessagesProvider, "", "/v1/messages"),
    "ollama": (OllamaChatProvider, "", "/api/chat"),
}
REQUEST = ChatRequest(messages=(ChatMessage("user", "hi"),))


@pytest.mark.parametrize("case", ["deep", "wrong type"])
@pytest.mark.parametrize("kind", sorted(PROVIDERS))
async def test_over_the_wire_the_stream_and_the_blocking_call_raise_protocol_errors(
    kind: str, case: str
) -> None:
    cls, suffix, path = PROVIDERS[kind]
    data = DEEP if case == "deep" else WIRE_WRONG_TYPES[kind]
    streamed = Reply(body=frame(kind, first_text(kind)) + frame(kind, data), cuts=[40])
    blocking = Reply(body=DEEP.encode(), content_type="application/json")

    def make(server: Any) -> HttpModelProvider:
        return cls("p", config(kind, server.url + suffix))

    async with served(make, path, [streamed, blocking]) as (provider, _):
        events, error = await collect(provider.stream(REQUEST))
        with pytest.raises(StreamProtocolError):
            await provider.complete(REQUEST)
    assert events == [text("Hi")]
    assert isinstance(error, StreamProtocolError), error


def test_the_bounded_parse_is_sans_io() -> None:
    """It sits beside the decoders, so it obeys their rule (architecture §1: pure cores)."""
    module = REPO / "providers" / "bounded_json.py"
    assert not {name.split(".")[0] for name in imported_modules(module)} & IO_MODULES
