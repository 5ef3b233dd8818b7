"""Drives the OpenAI Python SDK through a disaggregated fleet for disagg_e2e_test.go.

Usage: python disagg_openai.py BASE_URL SYSTEM_PROMPT
Sends one plain and one streaming chat completion with SYSTEM_PROMPT and
prints one JSON object: for each, the status, the decode and prefill
workers the router named, the text and the usage the answer reported.
"""

import json
import sys

import openai


def legs(headers) -> dict:
    return {
        "backend": headers.get("x-prefixgate-backend"),
        "prefill_backend": headers.get("x-prefixgate-prefill-backend"),
    }


def main() -> None:
    base, system = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "plain question"},
    ]
    raw = client.chat.completions.with_raw_response.create(model="vllmsim/tiny", messages=messages, max_tokens=3)
    plain = raw.parse()
    out = {
        "plain": {
            "status": raw.status_code,
            **legs(raw.headers),
            "text": plain.choices[0].message.content,
            "prompt_tokens": plain.usage.prompt_tokens,
            "cached_tokens": plain.usage.prompt_tokens_details.cached_tokens,
        }
    }
    messages[1]["content"] = "streaming question"
    with client.chat.completions.with_streaming_response.create(
        model="vllmsim/tiny",
        messages=messages,
        max_tokens=5,
        stream=True,
        stream_options={"include_usage": True},
    ) as resp:
        text, usage, chunks = "", None, 0
        for chunk in resp.parse():
            chunks += 1
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
            if chunk.usage is not None:
                usage = chunk.usage
        out["stream"] = {
            "status": resp.status_code,
            **legs(resp.headers),
            "chunks": chunks,
            "text": text,
            "prompt_tokens": usage.prompt_tokens if usage else -1,
            "cached_tokens": usage.prompt_tokens_details.cached_tokens if usage else -1,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
