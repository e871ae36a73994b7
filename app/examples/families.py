"""What each quick start sends: the server flags of a family, the chat request, the
prompt the engine was given and the output it generated, as text in the family's
markup (tokenized with the bundled tokenizer before it is streamed).

Prompts are rendered by hand in each family's chat format and abridged (no tools
system prompt): derender reads only whether the prompt leaves the output inside
reasoning. Outputs follow what those models write (the golden transcripts recorded
from vLLM 0.33.0 hold the same shapes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
QUESTION = "What's the weather in Paris? Do I need an umbrella?"
REASONING = "The user wants the weather in Paris; I have no live data, so I call the tool."
ANSWER = "Let me check the current conditions in Paris."
ARGUMENTS = {"city": "Paris", "unit": "celsius"}


@dataclass(frozen=True)
class Example:
    """One family's quick start: ``family`` is its row in the README's family table."""

    family: str
    model: str
    reasoning_parser: str
    tool_parser: str
    prompt: str
    output: str
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def flags(self) -> list[str]:
        """The server's flags, as the family table gives them."""
        return [
            "--model", self.model,
            "--reasoning-parser", self.reasoning_parser,
            "--tool-call-parser", self.tool_parser,
            "--enable-auto-tool-choice",
        ]  # fmt: skip

    @property
    def chat_request(self) -> dict[str, Any]:
        """The chat request as the user sent it (sent with every chunk)."""
        request: dict[str, Any] = {
            "model": self.model,
            "tools": [WEATHER_TOOL],
            "messages": [{"role": "user", "content": QUESTION}],
        }
        if self.chat_template_kwargs:
            request["chat_template_kwargs"] = self.chat_template_kwargs
        return request


QWEN3_PROMPT = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
HERMES_CALL = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n'
    "</tool_call><|im_end|>"
)
DEEPSEEK_PROMPT = (
    f"<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>{QUESTION}<｜Assistant｜><think>"
)
DEEPSEEK_END = "<｜end▁of▁sentence｜>"


def _dsml(block: str, prefix: str) -> str:
    """A DSML call block; ``prefix`` is what follows ｜DSML｜ in each tag."""
    tag = f"｜DSML｜{prefix}"
    return (
        f"<{tag}{block}>\n"
        f'<{tag}invoke name="get_weather">\n'
        f'<{tag}parameter name="city" string="true">Paris</{tag}parameter>\n'
        f'<{tag}parameter name="unit" string="true">celsius</{tag}parameter>\n'
        f"</{tag}invoke>\n"
        f"</{tag}{block}>"
    )


EXAMPLES: dict[str, Example] = {
    "qwen3": Example(
        family="Qwen3 (hybrid thinking), QwQ",
        model="qwen3",
        reasoning_parser="qwen3",
        tool_parser="hermes",
        prompt=QWEN3_PROMPT,
        output=f"<think>\n{REASONING}\n</think>\n\n{ANSWER}\n{HERMES_CALL}",
    ),
    "qwen3-coder": Example(
        family="Qwen3-Coder",
        model="qwen3",
        reasoning_parser="qwen3",
        tool_parser="qwen3_coder",
        prompt=QWEN3_PROMPT,
        output=(
            f"<think>\n{REASONING}\n</think>\n\n{ANSWER}\n<tool_call>\n<function=get_weather>\n"
            "<parameter=city>\nParis\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n"
            "</function>\n</tool_call><|im_end|>"
        ),
    ),
    "deepseek-r1-qwen3": Example(
        family="DeepSeek-R1 on Qwen3 (distilled)",
        model="qwen3",
        reasoning_parser="deepseek_r1",
        tool_parser="hermes",
        prompt=QWEN3_PROMPT,
        output=f"<think>\n{REASONING}\n</think>\n\n{ANSWER}\n{HERMES_CALL}",
    ),
    "deepseek-r1": Example(
        family="DeepSeek-R1",
        model="deepseek",
        reasoning_parser="deepseek_r1",
        tool_parser="deepseek_v3",
        prompt=DEEPSEEK_PROMPT,
        output=(
            f"{REASONING}</think>{ANSWER}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
            '<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris", "unit": "celsius"}\n```'
            f"<｜tool▁call▁end｜><｜tool▁calls▁end｜>{DEEPSEEK_END}"
        ),
    ),
    "deepseek-v3": Example(
        family="DeepSeek-V3 (0324)",
        model="deepseek",
        reasoning_parser="deepseek_v3",
        tool_parser="deepseek_v3",
        prompt=DEEPSEEK_PROMPT,
        output=(
            f"{REASONING}</think>{ANSWER}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
            '<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris", "unit": "celsius"}\n```'
            f"<｜tool▁call▁end｜><｜tool▁calls▁end｜>{DEEPSEEK_END}"
        ),
        chat_template_kwargs={"thinking": True},
    ),
    "deepseek-v3.1": Example(
        family="DeepSeek-V3.1",
        model="deepseek",
        reasoning_parser="deepseek_v3",
        tool_parser="deepseek_v31",
        prompt=DEEPSEEK_PROMPT,
        output=(
            f"{REASONING}</think>{ANSWER}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather"
            '<｜tool▁sep｜>{"city": "Paris", "unit": "celsius"}'
            f"<｜tool▁call▁end｜><｜tool▁calls▁end｜>{DEEPSEEK_END}"
        ),
        chat_template_kwargs={"thinking": True},
    ),
    "deepseek-v3.2": Example(
        family="DeepSeek-V3.2",
        model="deepseek",
        reasoning_parser="deepseek_v3",
        tool_parser="deepseek_v32",
        prompt=DEEPSEEK_PROMPT,
        output=f"{REASONING}</think>{ANSWER}{_dsml('function_calls', '')}{DEEPSEEK_END}",
        chat_template_kwargs={"thinking": True},
    ),
    "deepseek-v4": Example(
        family="DeepSeek-V4",
        model="deepseek",
        reasoning_parser="deepseek_v4",
        tool_parser="deepseek_v4",
        prompt=DEEPSEEK_PROMPT,
        output=f"{REASONING}</think>{ANSWER}{_dsml('tool_calls', '')}{DEEPSEEK_END}",
    ),
    "deepseek-v4.1": Example(
        family="DeepSeek-V4.1",
        model="deepseek",
        reasoning_parser="deepseek_v41",
        tool_parser="deepseek_v41",
        prompt=DEEPSEEK_PROMPT,
        output=f"{REASONING}</think>{ANSWER}{_dsml('calls', ' ')}{DEEPSEEK_END}",
    ),
    "gpt-oss": Example(
        family="gpt-oss (Harmony)",
        model="gpt-oss",
        reasoning_parser="openai_gptoss",
        tool_parser="openai",
        prompt=(
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
            "OpenAI.\nReasoning: medium\n# Valid channels: analysis, commentary, final.<|end|>"
            f"<|start|>user<|message|>{QUESTION}<|end|><|start|>assistant"
        ),
        output=(
            f"<|channel|>analysis<|message|>{REASONING}<|end|><|start|>assistant"
            f"<|channel|>commentary<|message|>{ANSWER}<|end|><|start|>assistant"
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            '{"city": "Paris", "unit": "celsius"}<|call|>'
        ),
    ),
}
