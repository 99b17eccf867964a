"""The model-backed comparison workload on the Python SDK (voqalize-agent-sdk 0.11.0, with its
gemini extra): a GeminiBrain with a short instruction and no tools, so every user message is one
model request whose streamed answer is spoken. Same behaviour as tools/src/bin/model_workload.rs.

Against the stand-in provider (tools/src/bin/provider.rs) each answer is the workload's 41 words in 8
pieces; tools/scripts/compare-model runs this brain and the Rust one against one provider.

    cargo run --release -p voqalize-tools --bin provider -- --listen 127.0.0.1:8790 &
    GEMINI_API_KEY=x .venv/bin/python tools/python/model_brain.py --port 8794 \
        --base-url http://127.0.0.1:8790 --model workload
"""

import argparse
import asyncio

from google import genai
from google.genai import types
from voqalize.conformance.host import BrainServer
from voqalize.sdk.gemini import GeminiBrain

# The instruction, the same as the Rust twin's.
INSTRUCTION = (
    "You are the front desk of a restaurant, on a voice call. Answer in "
    "two or three short spoken sentences."
)


class ModelWorkload(GeminiBrain):
    """One call's brain: the SDK's Gemini voice core, no tools."""

    def __init__(self, client: genai.Client, model: str) -> None:
        super().__init__(client=client, system_instruction=INSTRUCTION, model=model)


async def main(port: int, base_url: str, model: str) -> None:
    # One client for every call, as the Rust brain shares one provider layer; the key comes from
    # GEMINI_API_KEY or GOOGLE_API_KEY, as there.
    client = genai.Client(http_options=types.HttpOptions(base_url=base_url))
    server = BrainServer(lambda: ModelWorkload(client, model), port=port, allow_unverified=True)
    await server.start()
    print(f"serving a brain on {server.url}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8794)
    parser.add_argument("--base-url", default="http://127.0.0.1:8790")
    parser.add_argument("--model", default="workload")
    args = parser.parse_args()
    asyncio.run(main(args.port, args.base_url, args.model))
