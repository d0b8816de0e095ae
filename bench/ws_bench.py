"""WebSocket echo benchmark for `bench/ws.sh`: 1 KiB round trips per second over N sessions.

    ws_bench.py server PORT            an echo server (Python's websockets, no compression)
    ws_bench.py client URL SESSIONS SECONDS   prints round trips per second

Each session sends 1 KiB, waits for its echo, and repeats; the figure is all sessions' round trips over the time.
"""
import asyncio, os, sys, time

import websockets

PAYLOAD = os.urandom(1024)


async def serve(port):
    async def echo(ws):
        async for message in ws:
            await ws.send(message)
    async with websockets.serve(echo, "127.0.0.1", port, compression=None, max_size=None):
        await asyncio.Future()


async def client(url, sessions, seconds):
    deadline = time.monotonic() + seconds
    counts = [0] * sessions

    async def one(i):
        async with websockets.connect(url, compression=None, proxy=None, max_size=None) as ws:
            while time.monotonic() < deadline:
                await ws.send(PAYLOAD)
                await ws.recv()
                counts[i] += 1
    start = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(sessions)))
    print(f"{sum(counts) / (time.monotonic() - start):.0f}")


if sys.argv[1] == "server":
    asyncio.run(serve(int(sys.argv[2])))
else:
    asyncio.run(client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
