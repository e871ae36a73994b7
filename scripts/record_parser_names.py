"""Record the parser names vLLM 0.33.0 registers, for the suite to hold ours against.

Runs only with the oracle's Python (it asks vLLM's own registries):

    ../shared/oracle/venv/bin/python scripts/record_parser_names.py

and writes tests/golden/vllm-parser-names.json: vLLM's tool-call and reasoning parser
names, sorted. Nothing in app/, cache/, parsers/ or tests/ imports this script.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import vllm
from vllm.reasoning import ReasoningParserManager
from vllm.tool_parsers import ToolParserManager

OUT = Path(__file__).parents[1] / "tests" / "golden" / "vllm-parser-names.json"


def main() -> None:
    if vllm.__version__ != "0.33.0":
        sys.exit(f"vLLM 0.33.0 is the reference; this is {vllm.__version__}")
    names = {
        "vllm": vllm.__version__,
        "tool_parsers": sorted(ToolParserManager.list_registered()),
        "reasoning_parsers": sorted(ReasoningParserManager.list_registered()),
    }
    OUT.write_text(json.dumps(names, indent=1) + "\n")
    print(f"{OUT}: {len(names['tool_parsers'])} tool, {len(names['reasoning_parsers'])} reasoning")


if __name__ == "__main__":
    main()
