#!/usr/bin/env python3
"""A loopback proxy in front of `mlxctl serve` that keeps the bodies of refused requests.

  python scripts/record_proxy.py --upstream http://127.0.0.1:8080 --port 8081 --out DIR [--tag NAME] [--all]

Every request is forwarded as it is (headers, body, streamed response chunk by chunk). A
request answered 4xx has its body written to DIR/<tag>-<n>-<status>.json with its method,
path and the error body, so an agent client's failing request can be replayed as a test
fixture (tests/server/client_bodies/); with --all, every POST body is kept, whatever its answer.
scripts/client_sessions.sh points each client at one.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from aiohttp import ClientSession, ClientTimeout, web

HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding"}


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the server's base URL")
    parser.add_argument("--port", type=int, required=True, help="port to listen on (127.0.0.1)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the refused requests")
    parser.add_argument("--tag", default="request", help="file-name prefix (the client's name)")
    parser.add_argument("--all", action="store_true", help="keep every POST body, not only refused ones")
    return parser.parse_args()


def as_json(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def save(args: argparse.Namespace, request: web.Request, body: bytes, status: int, answer: bytes) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    n = len(list(args.out.glob(f"{args.tag}-*.json"))) + 1
    route = re.sub(r"[^a-z0-9]+", "_", request.path.lower()).strip("_")
    record = {"method": request.method, "path": request.path_qs, "status": status,
              "error": as_json(answer), "body": as_json(body)}
    (args.out / f"{args.tag}-{n}-{route}-{status}.json").write_text(json.dumps(record, indent=1))


def make_app(args: argparse.Namespace) -> web.Application:
    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        session: ClientSession = request.app["session"]
        async with session.request(request.method, args.upstream.rstrip("/") + request.path_qs,
                                   headers=headers, data=body) as upstream:
            if 400 <= upstream.status < 500:
                answer = await upstream.read()
                save(args, request, body, upstream.status, answer)
                return web.Response(status=upstream.status, body=answer,
                                    content_type=upstream.content_type)
            if args.all and request.method == "POST":
                save(args, request, body, upstream.status, b"")
            out = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP})
            await out.prepare(request)
            async for chunk in upstream.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    async def session_ctx(app: web.Application):
        app["session"] = ClientSession(timeout=ClientTimeout(total=None), auto_decompress=False)
        yield
        await app["session"].close()

    app = web.Application(client_max_size=256 * 1024 * 1024)
    app.cleanup_ctx.append(session_ctx)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


def main() -> None:
    args = parse()
    web.run_app(make_app(args), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
