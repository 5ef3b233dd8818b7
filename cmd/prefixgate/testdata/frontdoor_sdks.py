"""Drives the official OpenAI and Anthropic Python SDKs through prefixgate for
frontdoor_e2e_test.go.

Usage: python frontdoor_sdks.py ROUTER_URL REPLICA_URL...

Every section talks to the router at ROUTER_URL, except the random balancer of
the chains section, which sends each request to one of the REPLICA_URLs drawn at
random. Prints one JSON object: per section what the SDK saw (statuses, the
X-Prefixgate-Backend header, event types, texts, counts) or, if the section
raised, {"error": traceback}. The Go test asserts on it.
"""

import io
import json
import math
import random
import struct
import sys
import traceback
import wave

import anthropic
import openai

MODEL = "vllmsim/tiny"
BACKEND = "x-prefixgate-backend"
CONVERSATIONS, FOLLOW_UPS = 20, 10


def openai_client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=30)


def responses_plain(client: openai.OpenAI) -> dict:
    raw = client.responses.with_raw_response.create(
        model=MODEL, instructions="Answer briefly.", input="What is a prefix?", max_output_tokens=4
    )
    resp = raw.parse()
    return {
        "status": raw.status_code,
        "backend": raw.headers.get(BACKEND),
        "id": resp.id,
        "object": resp.object,
        "state": resp.status,
        "text": resp.output_text,
        "input_tokens": resp.usage.input_tokens,
        "output_tokens": resp.usage.output_tokens,
    }


def responses_streamed(client: openai.OpenAI) -> dict:
    """A streamed response read event by event, then a plain follow-up and a
    GET naming the id the router learned from the stream."""
    out: dict = {"types": [], "sequence": [], "deltas": ""}
    with client.responses.with_streaming_response.create(
        model=MODEL,
        instructions="Answer briefly.",
        input="Stream a short answer.",
        max_output_tokens=6,
        stream=True,
    ) as raw:
        out["status"] = raw.status_code
        out["backend"] = raw.headers.get(BACKEND)
        out["content_type"] = raw.headers.get("content-type")
        for event in raw.parse():
            out["types"].append(event.type)
            out["sequence"].append(event.sequence_number)
            if event.type == "response.created":
                out["id"] = event.response.id
            elif event.type == "response.output_text.delta":
                out["deltas"] += event.delta
            elif event.type == "response.output_text.done":
                out["done_text"] = event.text
            elif event.type == "response.completed":
                out["completed_text"] = event.response.output_text
                out["completed_id"] = event.response.id
                out["output_tokens"] = event.response.usage.output_tokens
    follow = client.responses.with_raw_response.create(
        model=MODEL, input="And then?", previous_response_id=out["id"], max_output_tokens=2
    )
    out["follow_up"] = {
        "status": follow.status_code,
        "backend": follow.headers.get(BACKEND),
        "previous": follow.parse().previous_response_id,
    }
    got = client.responses.with_raw_response.retrieve(out["id"])
    out["retrieve"] = {
        "status": got.status_code,
        "backend": got.headers.get(BACKEND),
        "id": got.parse().id,
        "text": got.parse().output_text,
    }
    return out


def responses_stream_helper(client: openai.OpenAI) -> dict:
    """The SDK's own stream helper, which rebuilds the response from the
    events and fails on an event out of place."""
    types = []
    with client.responses.stream(model=MODEL, input="Once more, streamed.", max_output_tokens=5) as stream:
        for event in stream:
            types.append(event.type)
        final = stream.get_final_response()
    return {"types": types, "text": final.output_text, "state": final.status, "id": final.id}


def responses_background_cancel(client: openai.OpenAI) -> dict:
    """A background response cancelled through the router, which must send the
    cancel to the replica that holds it. Should the response finish first, that
    replica answers vLLM's 400 (a replica that does not hold it would answer 404)."""
    raw = client.responses.with_raw_response.create(
        model=MODEL, input="A long task.", max_output_tokens=4000, background=True
    )
    queued = raw.parse()
    out = {"stored_on": raw.headers.get(BACKEND), "queued": queued.status, "created_id": queued.id}
    try:
        cancel = client.responses.with_raw_response.cancel(queued.id)
    except openai.BadRequestError as e:
        return out | {"status": e.status_code, "backend": e.response.headers.get(BACKEND), "text": e.message}
    return out | {
        "status": cancel.status_code,
        "backend": cancel.headers.get(BACKEND),
        "state": cancel.parse().status,
        "id": cancel.parse().id,
    }


def responses_unknown_id(client: openai.OpenAI) -> dict:
    try:
        client.responses.create(model=MODEL, input="hi", previous_response_id="resp_neverseen0000")
    except openai.NotFoundError as e:
        return {"status": e.status_code, "code": e.code, "param": e.param, "type": e.type}
    return {"status": 200}


def chains(router: str, replicas: list[str]) -> dict:
    """CONVERSATIONS chains of FOLLOW_UPS follow-ups by previous_response_id,
    interleaved turn by turn, through the router and then straight to a replica
    drawn at random per request. A failed follow-up leaves the chain where it
    was: the next turn names the last answered id."""
    via_router = openai_client(router)
    direct = {u: openai_client(u) for u in replicas}
    rng = random.Random(22)

    def run(pick) -> dict:
        prev = [None] * CONVERSATIONS
        stored_on = [None] * CONVERSATIONS
        answered = failed = misplaced = 0
        errors: dict = {}
        for turn in range(FOLLOW_UPS + 1):
            for c in range(CONVERSATIONS):
                name, client = pick()
                kwargs = {"model": MODEL, "input": f"conversation {c} turn {turn}", "max_output_tokens": 2}
                if prev[c] is not None:
                    kwargs["previous_response_id"] = prev[c]
                try:
                    raw = client.responses.with_raw_response.create(**kwargs)
                except openai.APIStatusError as e:
                    if turn == 0:
                        raise
                    failed += 1
                    key = f"{e.status_code} {e.code}"
                    errors[key] = errors.get(key, 0) + 1
                    continue
                backend = raw.headers.get(BACKEND) or name
                if turn > 0:
                    answered += 1
                    if backend != stored_on[c]:
                        misplaced += 1
                prev[c], stored_on[c] = raw.parse().id, backend
        return {
            "answered": answered,
            "failed": failed,
            "misplaced": misplaced,
            "errors": errors,
            "replicas_used": len(set(stored_on)),
        }

    def at_random():
        url = rng.choice(replicas)
        return url.removeprefix("http://"), direct[url]

    ours = run(lambda: ("", via_router))
    rand = run(at_random)
    return {"follow_ups": CONVERSATIONS * FOLLOW_UPS, "router": ours, "random": rand}


def embeddings(client: openai.OpenAI) -> dict:
    raw = client.embeddings.with_raw_response.create(model=MODEL, input=["a shared prefix", "a shared prefix too"])
    resp = raw.parse()
    return {
        "status": raw.status_code,
        "backend": raw.headers.get(BACKEND),
        "count": len(resp.data),
        "dims": [len(d.embedding) for d in resp.data],
        "norms": [math.sqrt(sum(x * x for x in d.embedding)) for d in resp.data],
        "prompt_tokens": resp.usage.prompt_tokens,
    }


def small_wav(seconds: float = 1.0, rate: int = 16000) -> bytes:
    """A mono 16-bit WAV of a 440 Hz tone."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        n = int(seconds * rate)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate))) for i in range(n)))
    return buf.getvalue()


def transcription(client: openai.OpenAI) -> dict:
    wav = small_wav()
    raw = client.audio.transcriptions.with_raw_response.create(model=MODEL, file=("tone.wav", wav, "audio/wav"))
    plain = raw.parse()
    verbose = client.audio.transcriptions.create(
        model=MODEL, file=("tone.wav", wav, "audio/wav"), response_format="verbose_json"
    )
    return {
        "status": raw.status_code,
        "backend": raw.headers.get(BACKEND),
        "wav_bytes": len(wav),
        "text": plain.text,
        "duration": verbose.duration,
        "verbose_text": verbose.text,
    }


def anthropic_client(base: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0, timeout=30)


def messages_plain(client: anthropic.Anthropic) -> dict:
    raw = client.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=4,
        system="You are terse.",
        messages=[{"role": "user", "content": "What is a prefix?"}],
    )
    msg = raw.parse()
    return {
        "status": raw.status_code,
        "backend": raw.headers.get(BACKEND),
        "type": msg.type,
        "role": msg.role,
        "text": "".join(b.text for b in msg.content if b.type == "text"),
        "stop_reason": msg.stop_reason,
        "input_tokens": msg.usage.input_tokens,
        "output_tokens": msg.usage.output_tokens,
    }


def messages_streamed(client: anthropic.Anthropic) -> dict:
    """The SDK's stream helper (text_stream and the final message it
    accumulates), then stream=True read as raw events."""
    kwargs = {
        "model": MODEL,
        "max_tokens": 6,
        "system": "You are terse.",
        "messages": [{"role": "user", "content": "Stream a short answer."}],
    }
    with client.messages.stream(**kwargs) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    types, deltas = [], ""
    for event in client.messages.create(stream=True, **kwargs):
        types.append(event.type)
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            deltas += event.delta.text
    return {
        "helper_text": text,
        "final_text": "".join(b.text for b in final.content if b.type == "text"),
        "final_stop_reason": final.stop_reason,
        "final_output_tokens": final.usage.output_tokens,
        "types": types,
        "deltas": deltas,
    }


def messages_unknown_model(client: anthropic.Anthropic) -> dict:
    try:
        client.messages.create(model="no-such-model", max_tokens=2, messages=[{"role": "user", "content": "hi"}])
    except anthropic.APIStatusError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return {
            "status": e.status_code,
            "class": type(e).__name__,
            "type": body.get("type"),
            "error_type": (body.get("error") or {}).get("type"),
        }
    return {"status": 200}


def main() -> None:
    router, replicas = sys.argv[1], sys.argv[2:]
    oa, an = openai_client(router), anthropic_client(router)
    sections = {
        "responses_plain": lambda: responses_plain(oa),
        "responses_streamed": lambda: responses_streamed(oa),
        "responses_stream_helper": lambda: responses_stream_helper(oa),
        "responses_background_cancel": lambda: responses_background_cancel(oa),
        "responses_unknown_id": lambda: responses_unknown_id(oa),
        "chains": lambda: chains(router, replicas),
        "embeddings": lambda: embeddings(oa),
        "transcription": lambda: transcription(oa),
        "messages_plain": lambda: messages_plain(an),
        "messages_streamed": lambda: messages_streamed(an),
        "messages_unknown_model": lambda: messages_unknown_model(an),
    }
    out = {}
    for name, run in sections.items():
        try:
            out[name] = run()
        except Exception:  # noqa: BLE001 - reported to the Go test, which fails on it
            out[name] = {"error": traceback.format_exc()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
