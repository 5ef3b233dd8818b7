"""A tiny ASGI app served by uvicorn, the server vLLM runs, for the Go tests
of the pool's HTTP/1.1 client against a real server (uvicorn_test.go).

It binds 127.0.0.1 on a free port, prints the port, and serves:
  POST /run         counts the request (one run of the "engine") and answers
  POST /run-and-drop counts the request, then closes its connection without
                    an answer, as a worker that fails mid-request does
  GET  /runs        how many requests were counted
  POST /big-header  answers with a header of 2 MB
"""

import asyncio
import gc
import socket
import sys

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

runs = 0


async def read_body(receive):
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            return body


async def answer(send, body, headers=()):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), *headers]})
    await send({"type": "http.response.body", "body": body})


def drop_connection(client):
    # ASGI gives an app no handle on its connection: find uvicorn's
    # protocol object serving this client and close its transport.
    for obj in gc.get_objects():
        if isinstance(obj, H11Protocol) and obj.client == client:
            obj.transport.close()


async def app(scope, receive, send):
    global runs
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"]
    await read_body(receive)
    if path == "/run":
        runs += 1
        await answer(send, b"ok")
    elif path == "/run-and-drop":
        runs += 1
        drop_connection(tuple(scope["client"]))
        await asyncio.sleep(0.05)  # the close goes out before anything else
    elif path == "/runs":
        await answer(send, str(runs).encode())
    elif path == "/big-header":
        await answer(send, b"ok", [(b"x-pad", b"p" * (2 << 20))])
    else:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def main():
    keep_alive = float(sys.argv[1]) if len(sys.argv) > 1 else 5
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, http="h11", timeout_keep_alive=keep_alive, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
