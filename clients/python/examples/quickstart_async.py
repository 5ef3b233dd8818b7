"""The asynchronous client: several prompts that share a context, sent
concurrently, then a lint of the same requests. Needs PREFIXGATE_URL.

    PREFIXGATE_URL=http://127.0.0.1:8080 python examples/quickstart_async.py
"""

from __future__ import annotations

import asyncio
import os

from prefixgate import AsyncClient, Document, PromptSpec, RPCError, build, build_key


async def main(url: str) -> None:
    base = PromptSpec(
        model="vllmsim/tiny",
        instructions="Answer from the document.",
        documents=[Document(id="q3", title="Quarterly report", text="Revenue grew 12% to $4.1M.")],
        question="",
        parameters={"max_tokens": 16},
    )
    questions = ["What grew?", "By how much?", "To what?"]
    specs = [PromptSpec(**{**base.__dict__, "question": q}) for q in questions]
    _, route = build_key(specs[0])
    async with AsyncClient(url) as client:
        try:
            answers = await asyncio.gather(*(client.chat(s) for s in specs))
        except RPCError as e:
            if e.retryable:
                print(f"router busy ({e.code}); retry after {e.retry_after or 1}s")
                return
            raise
        for q, a in zip(questions, answers):
            # Same instructions and document: the same key, one replica's cache.
            print(q, "->", a.content, "|", a.routing.key if a.routing else "?", route.key_hex)
        async for chunk in client.chat_stream(specs[0]):
            print(chunk.delta, end="", flush=True)
        print()
        report = await client.lint([build(s) for s in specs])
        print(len(report.findings), "lint findings;", report.summary)


if __name__ == "__main__":
    url = os.environ.get("PREFIXGATE_URL")
    if not url:
        raise SystemExit("set PREFIXGATE_URL to a router")
    asyncio.run(main(url))
