"""The quick starts (``python -m app.examples FAMILY``), one per row of the README's
family table: each streams its family's output and prints the reasoning, the answer and
the tool call that output holds; one runs against a real server as the README says;
the README names each one and every bundled tokenizer's directory and helper.

A family without a bundled vocabulary takes the user's model directory; here it runs on
the test tokenizer that stands in for it (STAND_INS)."""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
from collections.abc import Callable

import pytest

from app.examples.__main__ import main, run
from app.examples.families import ANSWER, ARGUMENTS, EXAMPLES, REASONING
from app.tokens.tokenizer import BUNDLED, Tokenizer
from tests.support.golden import synthetic_model
from tests.support.llama_tokenizers import llama_tokenizer_dir
from tests.support.processes import ROOT, serving
from tests.support.tekken_tokenizers import tekken_tokenizer_dir
from tests.support.tokenizers import bundled_tokenizer

# What stands in here for the model directory of each family that has no bundled
# vocabulary: a bundled name or a test tokenizer's directory.
STAND_INS: dict[str, Callable[[], object]] = {
    # R1's vocabulary; every token these outputs hold has the same id in V3-0324's
    # (placeholders where R1 has <think>, </think>), V3.1's (R1's plus the search
    # tokens at 128796-128797) and V3.2's (V3.1's ids).
    "deepseek-v3": lambda: "deepseek-r1",
    "deepseek-v3.1": lambda: "deepseek-r1",
    "deepseek-v3.2": lambda: "deepseek-r1",
    # V4's vocabulary; V4.1's differs in tokens these outputs do not hold.
    "deepseek-v4.1": lambda: "deepseek",
    # Real vocabularies from Meta's llama-models package (Llama 3.1's is Llama 3.2's).
    "llama3-json": lambda: llama_tokenizer_dir("llama3"),
    "llama4-json": lambda: llama_tokenizer_dir("llama3"),
    "llama4-pythonic": lambda: llama_tokenizer_dir("llama4"),
    "pythonic": lambda: llama_tokenizer_dir("llama3"),
    # xLAM-2's Qwen2.5-based models: Qwen2.5's ids are the first of Qwen3's.
    "xlam": lambda: "qwen3",
    # Mistral-Nemo's real tekken vocabulary; the test tokenizer with Magistral's controls.
    "mistral": lambda: tekken_tokenizer_dir("mistral_v3"),
    "magistral": lambda: tekken_tokenizer_dir("mistral_v13"),
    # Synthetic: Qwen3's vocabulary plus the family's markers as single tokens.
    "minimax-m2": lambda: synthetic_model("minimax_m2"),
    "kimi-k2": lambda: synthetic_model("kimi_k2"),
    "glm": lambda: synthetic_model("glm45"),
    "longcat": lambda: synthetic_model("longcat"),
    "seed-oss": lambda: synthetic_model("seed_oss"),
    # Qwen3's vocabulary stands in for Step's (these outputs hold no token of their own).
    "step5": lambda: "qwen3",
    "step3p5": lambda: "qwen3",
    "granite4": lambda: synthetic_model("granite"),
    "granite": lambda: synthetic_model("granite"),
    "inkling": lambda: synthetic_model("inkling"),
    "poolside": lambda: synthetic_model("poolside"),
    # Holo2 as recorded (N1): DeepSeek's call markup, read with R1's vocabulary.
    "holo2": lambda: "deepseek-r1",
    "nemotron-3": lambda: synthetic_model("nemotron_v3"),
    "phi4-mini": lambda: synthetic_model("phi4_mini"),
    "olmo3": lambda: synthetic_model("olmo3"),
    "ling3": lambda: synthetic_model("glm45"),
    "minimax-m3": lambda: synthetic_model("minimax_m3"),
    # Qwen3's vocabulary stands in for MiMo's (these outputs hold no MiMo-only token).
    "mimo": lambda: "qwen3",
    "k2-horizon": lambda: synthetic_model("k2_horizon"),
    "ernie45": lambda: synthetic_model("ernie45"),
    "step3": lambda: synthetic_model("step3"),
    "muse": lambda: synthetic_model("muse"),
    "gigachat3": lambda: synthetic_model("gigachat3"),
    "gemma4": lambda: synthetic_model("gemma4"),
    "granite-4.2": lambda: synthetic_model("nemotron_v3"),
    "granite-3": lambda: synthetic_model("granite"),
    "cohere-command-a": lambda: synthetic_model("cohere"),
    # Its markup is plain text: Qwen3's vocabulary stands in.
    "granite-20b-fc": lambda: "qwen3",
    "hunyuan-a13b": lambda: llama_tokenizer_dir("llama3"),
    "hy-v4": lambda: synthetic_model("hy"),
    "olmo3-instruct": lambda: synthetic_model("olmo3"),
    "dots": lambda: synthetic_model("dots"),
    "internlm": lambda: synthetic_model("internlm2"),
    "functiongemma": lambda: synthetic_model("functiongemma"),
    "plamo3": lambda: synthetic_model("plamo3"),
    "minicpm-v": lambda: synthetic_model("minicpmv"),
    # Its markup is plain text: Qwen3's vocabulary stands in.
    "minicpm5": lambda: "qwen3",
    "kimi-k3": lambda: synthetic_model("kimi_k3"),
    "apertus": lambda: synthetic_model("apertus"),
    "lfm2": lambda: synthetic_model("lfm2"),
    "jamba": lambda: synthetic_model("jamba"),
    # Qwen3's vocabulary with Qwen3's markup described in its response_template.
    "hf": lambda: synthetic_model("hf"),
    # Beam's quick start writes Qwen3's markup: the hf stand-in's template describes it.
    "beam": lambda: synthetic_model("hf"),
}


# FunctionGemma's stream sends each argument's JSON from the length already sent, as
# vLLM's does (docs/parity.md, functiongemma-chunk-reading): two arguments assemble so.
LENGTH_CUT = {"functiongemma": '{"city": "Paris"} "unit": "celsius"}'}


def tokenizer_of(name: str) -> tuple[str, Tokenizer]:
    """The ``--model`` a quick start runs with here and its tokenizer, loaded once per
    process (shared with the golden replays, which load the same directories)."""
    example = EXAMPLES[name]
    model = example.tokenizer if example.bundled else str(STAND_INS[name]())
    return model, bundled_tokenizer(model)


def printed(name: str) -> str:
    """What the quick start prints, run in process (tokenizers loaded once per session)."""
    model, tokenizer = tokenizer_of(name)
    out = io.StringIO()
    run(EXAMPLES[name], None, 4, out, tokenizer, model=model)
    return out.getvalue()


def test_without_a_family_it_lists_each_with_its_server_command() -> None:
    out = io.StringIO()
    main([], out=out)
    for name, example in EXAMPLES.items():
        assert f"{name} " in out.getvalue()
        assert f"scripts/serve {' '.join(example.flags())}\n" in out.getvalue()


def test_bundled_only_where_named_and_a_model_directory_asked_for_elsewhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, example in EXAMPLES.items():
        assert (example.tokenizer in BUNDLED) == example.bundled, name
        assert example.bundled != (name in STAND_INS), name
    with pytest.raises(SystemExit):
        main(["kimi-k2"])
    assert "give --model DIR" in capsys.readouterr().err


def test_a_quick_start_runs_on_the_model_directory_it_is_given() -> None:
    out = io.StringIO()
    main(["llama3-json", "--model", str(llama_tokenizer_dir("llama3"))], out=out)
    assert out.getvalue() == printed("llama3-json")


def parts(output: str, kind: str) -> str:
    """The text of every ``kind:`` delta line, joined."""
    return "".join(ast.literal_eval(v) for v in re.findall(rf"^{kind}: +(.*)$", output, re.M))


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_quick_start_prints_the_reasoning_the_answer_and_the_call(name: str) -> None:
    """Each part the output holds comes back whole, and nothing it does not hold: a
    family that writes no reasoning (or no text beside its call) prints none."""
    output = printed(name)
    example = EXAMPLES[name]
    reasons, answers = REASONING in example.output, ANSWER in example.output
    assert parts(output, "reasoning").strip() == (REASONING if reasons else "")
    assert parts(output, "content").strip() == (ANSWER if answers else "")
    # Streamed a few tokens a chunk: several deltas of each kind.
    assert output.count("\nreasoning: ") >= (3 if reasons else 0)
    if not example.calls:
        assert "called " not in output and "finish_reason: stop\n" in output
        return
    assert example.tool_parser is not None
    [call] = re.findall(r"^called get_weather\((.*)\)$", output, re.M)
    if name in LENGTH_CUT:
        assert call == LENGTH_CUT[name]
    else:
        assert json.loads(call) == ARGUMENTS
    assert output.count("finish_reason: tool_calls\n") == 1
    # A pythonic call is sent whole once its list parses, a Granite 4.0, ERNIE or dots
    # call at its end, a Muse call once its closing tag is in, a response template's call
    # when its region closes.
    whole = "pythonic" in example.tool_parser or example.tool_parser in (
        "granite4",
        "ernie45",
        "muse",
        "dots",
        "kimi_k3",
        "k2_horizon",
        "hf",
        "beam",
    )
    assert output.count("\ntool call 0: ") >= (1 if whole else 2)


def test_every_family_that_reasons_shows_it_and_every_other_says_why() -> None:
    """The quick starts without reasoning are the families that write none."""
    quiet = {name for name, example in EXAMPLES.items() if REASONING not in example.output}
    assert quiet == {
        "deepseek-v3",  # V3-0324 does not think
        "deepseek-v3.1",  # calls tools in its non-thinking mode
        "llama3-json",
        "llama4-json",
        "llama4-pythonic",
        "pythonic",
        "xlam",
        "mistral",  # no [THINK] before tokenizer v11
        "granite4",  # Granite 4.0 has no reasoning parser
        "phi4-mini",  # none either
        "gigachat3",  # none either
        "granite-20b-fc",  # nor granite-20b-functioncalling
        "granite-3",  # nor Granite 3.0 and 3.1
        "olmo3-instruct",  # after olmo3 reasoning vLLM's stream reads no call
        "dots",  # its parser reads no reasoning
        "internlm",  # nor InternLM2
        "functiongemma",  # nor FunctionGemma
        "minicpm5",  # nor MiniCPM5's
        "apertus",  # nor Apertus
        "lfm2",  # nor LFM2
        "jamba",  # nor Jamba
    }


def test_a_quick_start_streams_through_a_running_server_as_the_readme_says() -> None:
    example = EXAMPLES["deepseek-v4"]
    readme = (ROOT / "README.md").read_text()
    assert f"scripts/serve {' '.join(example.flags())}" in readme
    assert "python -m app.examples deepseek-v4 --url http://127.0.0.1:8000" in readme
    with serving(*example.flags()) as url:
        done = subprocess.run(
            [sys.executable, "-m", "app.examples", "deepseek-v4", "--url", url],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed("deepseek-v4")


def test_the_readme_names_every_quick_start_and_bundled_tokenizer() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("### Model families", 1)[1].split("\n\n\u1d43", 1)[0]
    # A cell's escaped pipes (`<\\|python_start\\|>`) are part of it.
    cells = [re.split(r"(?<!\\)\|", line) for line in table.splitlines() if line.startswith("| ")]
    rows = {cell[1].strip().replace("\\|", "|") for cell in cells[2:]}
    assert rows == {example.family for example in EXAMPLES.values()}
    for name in EXAMPLES:
        assert f"`{name}`" in readme, name
    for name, helper in BUNDLED.items():
        directory = helper.__module__.replace(".", "/")
        assert f"`{helper.__module__}.{helper.__name__}()`" in readme, name
        assert (ROOT / f"{directory}.py").is_file()
        assert re.search(rf"`~/\.cache/derender-server/{re.escape(name)}-v\d+`", readme), name
