"""Build a prompt, compute its routing key locally, and (with PREFIXGATE_URL
set) send it through a router.

    python examples/quickstart.py
"""

from __future__ import annotations

import os

from prefixgate import Client, Document, PromptSpec, RPCError, build_key

spec = PromptSpec(
    model="vllmsim/tiny",
    instructions="Answer from the document.",
    documents=[Document(id="q3", title="Quarterly report", text="Revenue grew 12% to $4.1M.")],
    question="What grew?",
    parameters={"max_tokens": 16},
    metadata={"request_id": "example-1"},  # volatile: never changes the key
)

body, route = build_key(spec)
print(body.decode())
print("key", route.key_hex)

url = os.environ.get("PREFIXGATE_URL")
if url:
    with Client(url) as client:
        try:
            res = client.chat(spec)
        except RPCError as e:
            raise SystemExit(f"router said {e.code}: {e.message}") from e
        print(res.content)
        print(
            "served by",
            res.routing.backend if res.routing else "?",
            "key",
            res.routing.key if res.routing else "?",
        )
