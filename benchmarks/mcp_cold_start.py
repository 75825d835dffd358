"""Cold start of `engram serve` against a bare MCP SDK server with one tool.

How to run (from the repository root, with the project's virtualenv):

    .venv/bin/python benchmarks/mcp_cold_start.py              # 7 runs each
    .venv/bin/python benchmarks/mcp_cold_start.py --runs 15 --json out.json

Each run spawns the server over stdio with the SDK's own client (`mcp.client.Client` with
`StdioServerParameters`) and times from just before the spawn to the answer of the first
`tools/list`. Runs alternate between the two servers so that the noise of a shared machine hits
both alike; the medians are compared. The target: Engram's median is at most 0.5 s above the bare
server's. The report also gives their ratio: tests/test_mcp.py runs this with a generous bound
(within twice the bare server's median) that a busy machine cannot break but a start-up that
does much more work would; the target itself is measured here, on an idle machine.

Everything lives in a temporary directory: ENGRAM_HOME and HOME point there (with an initialised
personal store, so the session is really opened), git config is blanked. The bare server is the
smallest useful `MCPServer`: one tool, `run()` over stdio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

BARE = """\
from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def ping(text: str = "") -> str:
    \"\"\"Answer with the same text.\"\"\"
    return text


server.run()
"""


def engram_command() -> list[str]:
    return [sys.executable, "-m", "engram", "serve"]


async def first_list(command: list[str], env: dict[str, str], cwd: Path) -> float:
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=cwd)
    started = time.perf_counter()
    async with Client(params) as client:
        tools = await client.list_tools()
        elapsed = time.perf_counter() - started
    assert tools.tools, "no tools listed"
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None, help="Also write the numbers here.")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="engram-cold-") as tmp:
        root = Path(tmp)
        (root / "home").mkdir()
        bare = root / "bare_server.py"
        bare.write_text(BARE)
        env = {
            "HOME": str(root / "home"),
            "ENGRAM_HOME": str(root / "home" / ".engram"),
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "ENGRAM_ACTOR": "Bench <bench@example.com>",
            "PATH": os.environ.get("PATH", ""),
        }
        subprocess.run(
            [sys.executable, "-m", "engram", "init"],
            env={**os.environ, **env},
            check=True,
            capture_output=True,
        )
        commands = {"bare": [sys.executable, str(bare)], "engram": engram_command()}
        times: dict[str, list[float]] = {name: [] for name in commands}
        for command in commands.values():  # warm the OS file cache once, not measured
            anyio.run(first_list, command, env, root)
        for _ in range(args.runs):
            for name, command in commands.items():
                times[name].append(anyio.run(first_list, command, env, root))

    medians = {name: statistics.median(values) for name, values in times.items()}
    report = {
        "runs": args.runs,
        "median_seconds": {k: round(v, 3) for k, v in medians.items()},
        "all_seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "difference_seconds": round(medians["engram"] - medians["bare"], 3),
        "ratio": round(medians["engram"] / medians["bare"], 3),
        "target_seconds": 0.5,
        "python": sys.version.split()[0],
    }
    report["ok"] = report["difference_seconds"] <= 0.5
    print(f"bare MCPServer, one tool : median {medians['bare']:.3f} s to the first tools/list")
    print(f"engram serve             : median {medians['engram']:.3f} s to the first tools/list")
    print(
        f"difference               : {report['difference_seconds']:+.3f} s "
        f"(target <= +0.500 s): {'ok' if report['ok'] else 'OVER'}"
    )
    print(f"ratio                    : {report['ratio']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
