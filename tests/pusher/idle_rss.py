#!/usr/bin/env python3
# What an idle subscribed connection costs a running myriad: opens N WebSockets,
# each subscribed to channel "news" (`pusher`: a Pusher client on /app/key1, which
# the server must know as --pusher-app ID:key1:SECRET; `framed`: /ws?channel=news),
# and prints the server RSS before and after from /proc/<pid>/status.
# `pusher-signin`: the Pusher client also signs in (user `u<i>`, signed with
# secret1, as the SDKs' authenticateUser does) before it subscribes.
#   python3 tests/pusher/idle_rss.py <server pid> <port> pusher|pusher-signin|framed <N>
import asyncio, hashlib, hmac, json, sys, websockets
pid, port, mode, n = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
async def one(i, conns):
    if mode.startswith("pusher"):
        ws = await websockets.connect(f"ws://127.0.0.1:{port}/app/key1?protocol=7", max_size=None, compression=None)
        hello = json.loads(await ws.recv())
        if mode == "pusher-signin":
            socket_id = json.loads(hello["data"])["socket_id"]
            user_data = json.dumps({"id": f"u{i}"})
            sig = hmac.new(b"secret1", f"{socket_id}::user::{user_data}".encode(), hashlib.sha256).hexdigest()
            await ws.send(json.dumps({"event": "pusher:signin", "data": {"auth": f"key1:{sig}", "user_data": user_data}}))
            await ws.recv()
        await ws.send(json.dumps({"event": "pusher:subscribe", "data": {"channel": "news"}}))
        await ws.recv()
    else:
        ws = await websockets.connect(f"ws://127.0.0.1:{port}/ws?channel=news", max_size=None, compression=None)
        await ws.recv()
    conns.append(ws)
async def main():
    conns = []
    before = rss()
    for start in range(0, n, 500):
        await asyncio.gather(*(one(i, conns) for i in range(start, min(n, start + 500))))
    await asyncio.sleep(2)
    after = rss()
    print(json.dumps({"mode": mode, "n": len(conns), "rss_before": before, "rss_after": after, "bytes_per_conn": (after - before) / len(conns)}))
asyncio.run(main())
