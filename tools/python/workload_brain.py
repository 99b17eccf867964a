"""The comparison workload on the Python SDK (voqalize-agent-sdk 0.11.0): every user message gets
one unit of 8 chunks, 41 words. Same behaviour as tools/src/bin/workload.rs.

    .venv/bin/python tools/python/workload_brain.py --port 8788
"""

import argparse
import asyncio

from voqalize.conformance.host import BrainServer
from voqalize.sdk import Brain, SpeechChunk, SpeechEnd, SpeechStart

# 8 chunks, 41 words in all.
CHUNKS = [
    "Thanks for calling, I heard you ",
    "and I am looking at your account, ",
    "so give me a moment ",
    "to check your booking for tonight ",
    "and the table you asked for. ",
    "Everything is in order, ",
    "the reservation is confirmed, ",
    "see you soon.",
]


class Workload(Brain):
    async def on_user_message(self, session, msg):
        yield SpeechStart()
        for chunk in CHUNKS:
            yield SpeechChunk(chunk)
        yield SpeechEnd()


async def main(port: int) -> None:
    server = BrainServer(Workload, port=port, allow_unverified=True)
    await server.start()
    print(f"serving a brain on {server.url}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8788)
    asyncio.run(main(parser.parse_args().port))
