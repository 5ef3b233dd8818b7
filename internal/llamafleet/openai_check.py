"""Calls prefixgate with the OpenAI Python SDK, plain and streaming.

Run by the llama.cpp fleet tests with the router's base URL; exits non-zero
with a message naming what was wrong, and prints one JSON line of figures.
"""

import json
import sys

import openai


def main(base_url, model):
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120)
    messages = [
        {"role": "system", "content": "You answer from the notes below.\n\n" + "notes " * 200},
        {"role": "user", "content": "What do the notes say?"},
    ]
    figures = {}

    # Plain, twice: the second call must find the shared prompt cached on
    # the replica prefixgate chose for both.
    for attempt in ("first", "second"):
        r = client.chat.completions.create(model=model, messages=messages, max_tokens=6, temperature=0)
        if not r.choices:
            sys.exit(f"plain {attempt}: no choices in {r}")
        if r.choices[0].finish_reason not in ("stop", "length"):
            sys.exit(f"plain {attempt}: finish_reason {r.choices[0].finish_reason!r}")
        if r.usage is None or r.usage.prompt_tokens <= 0:
            sys.exit(f"plain {attempt}: usage {r.usage}")
        details = r.usage.prompt_tokens_details
        if details is None or details.cached_tokens is None:
            sys.exit(f"plain {attempt}: usage lacks prompt_tokens_details.cached_tokens: {r.usage}")
        figures[f"plain_{attempt}_prompt"] = r.usage.prompt_tokens
        figures[f"plain_{attempt}_cached"] = details.cached_tokens
    if figures["plain_second_cached"] * 2 < figures["plain_second_prompt"]:
        sys.exit(f"plain second: only {figures['plain_second_cached']} of {figures['plain_second_prompt']} prompt tokens cached")

    # Streaming, with the usage chunk at the end.
    stream = client.chat.completions.create(
        model=model, messages=messages, max_tokens=6, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )
    chunks = 0
    finish = None
    usage = None
    for chunk in stream:
        chunks += 1
        for c in chunk.choices:
            if c.finish_reason is not None:
                finish = c.finish_reason
        if chunk.usage is not None:
            usage = chunk.usage
    if chunks < 2:
        sys.exit(f"stream: {chunks} chunks")
    if finish not in ("stop", "length"):
        sys.exit(f"stream: finish_reason {finish!r}")
    if usage is None or usage.prompt_tokens <= 0:
        sys.exit(f"stream: no usage chunk ({usage})")
    figures["stream_chunks"] = chunks
    figures["stream_prompt"] = usage.prompt_tokens
    print(json.dumps(figures))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: openai_check.py BASE_URL MODEL")
    main(sys.argv[1], sys.argv[2])
