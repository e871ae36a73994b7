"""What each quick start sends: the server flags of a family, the chat request, the
prompt the engine was given and the output it generated, as text in the family's
markup (tokenized with the family's tokenizer before it is streamed).

A family's tokenizer is a bundled one only where the bundle is that family's own
vocabulary; every other family's quick start takes the user's model directory
(``--model DIR``). Prompts are rendered by hand in each family's chat format and
abridged (no tools system prompt): derender reads only whether the prompt leaves the
output inside reasoning. Outputs follow what those models write (the golden
transcripts recorded from vLLM 0.33.0 hold the same shapes).
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
# The call in Qwen3-Coder's XML format (Step-3.5, Step-5 and Seed-OSS write it too).
_QWEN3_XML_CALL = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>"
)


# In place of a bundled name: the family's tokenizer is the user's model directory.
MODEL_DIR = "DIR"


@dataclass(frozen=True)
class Example:
    """One family's quick start: ``family`` is its row in the README's family table;
    ``tokenizer`` a bundled tokenizer's name, or ``MODEL_DIR``."""

    family: str
    tokenizer: str
    tool_parser: str | None
    prompt: str
    output: str
    reasoning_parser: str | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def calls(self) -> bool:
        """Whether the output holds a call its parser streams."""
        return self.tool_parser is not None and "get_weather" in self.output

    @property
    def bundled(self) -> bool:
        """Whether the family's own vocabulary is bundled (else ``--model DIR``)."""
        return self.tokenizer != MODEL_DIR

    def flags(self, model: str | None = None) -> list[str]:
        """The server's flags, as the family table gives them (``--model model`` if
        given, else the bundled name or ``DIR``)."""
        flags = ["--model", model or self.tokenizer]
        if self.reasoning_parser:
            flags += ["--reasoning-parser", self.reasoning_parser]
        if self.tool_parser:
            flags += ["--tool-call-parser", self.tool_parser, "--enable-auto-tool-choice"]
        return flags

    def chat_request(self, model: str | None = None) -> dict[str, Any]:
        """The chat request as the user sent it (sent with every chunk), to the model
        the server serves."""
        request: dict[str, Any] = {
            "model": model or self.tokenizer,
            "messages": [{"role": "user", "content": QUESTION}],
        }
        if self.calls:
            request["tools"] = [WEATHER_TOOL]
        if self.chat_template_kwargs:
            request["chat_template_kwargs"] = self.chat_template_kwargs
        return request


_GRANITE_PROMPT = (
    f"<|start_of_role|>user<|end_of_role|>{QUESTION}<|end_of_text|>"
    "<|start_of_role|>assistant<|end_of_role|>"
)
QWEN3_PROMPT = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
HERMES_CALL = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n'
    "</tool_call><|im_end|>"
)
DEEPSEEK_CHAT = (
    f"<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>{QUESTION}<｜Assistant｜>"
)
DEEPSEEK_PROMPT = f"{DEEPSEEK_CHAT}<think>"
DEEPSEEK_END = "<｜end▁of▁sentence｜>"
# DeepSeek-V3/R1's call: the type, the name and a fenced JSON block.
DEEPSEEK_V3_CALL = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    '```json\n{"city": "Paris", "unit": "celsius"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
)
LLAMA3_PROMPT = (
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
    f"{QUESTION}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
)
LLAMA_JSON_CALL = '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}'
PYTHONIC_CALL = '[get_weather(city="Paris", unit="celsius")]'


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
        tokenizer="qwen3",
        reasoning_parser="qwen3",
        tool_parser="hermes",
        prompt=QWEN3_PROMPT,
        output=f"<think>\n{REASONING}\n</think>\n\n{ANSWER}\n{HERMES_CALL}",
    ),
    "qwen3-coder": Example(
        family="Qwen3-Coder",
        tokenizer="qwen3",
        reasoning_parser="qwen3",
        tool_parser="qwen3_coder",
        prompt=QWEN3_PROMPT,
        output=f"<think>\n{REASONING}\n</think>\n\n{ANSWER}\n{_QWEN3_XML_CALL}<|im_end|>",
    ),
    "deepseek-r1-qwen3": Example(
        family="DeepSeek-R1 on Qwen3 (distilled)",
        tokenizer="qwen3",
        reasoning_parser="deepseek_r1",
        tool_parser="hermes",
        prompt=QWEN3_PROMPT,
        output=f"<think>\n{REASONING}\n</think>\n\n{ANSWER}\n{HERMES_CALL}",
    ),
    "deepseek-r1": Example(
        family="DeepSeek-R1",
        tokenizer="deepseek-r1",
        reasoning_parser="deepseek_r1",
        tool_parser="deepseek_v3",
        prompt=DEEPSEEK_PROMPT,
        output=f"{REASONING}</think>{ANSWER}{DEEPSEEK_V3_CALL}{DEEPSEEK_END}",
    ),
    # V3-0324 does not think: its vocabulary has no <think> token.
    "deepseek-v3": Example(
        family="DeepSeek-V3 (0324)",
        tokenizer=MODEL_DIR,
        reasoning_parser="deepseek_v3",
        tool_parser="deepseek_v3",
        prompt=DEEPSEEK_CHAT,
        output=f"{ANSWER}{DEEPSEEK_V3_CALL}{DEEPSEEK_END}",
    ),
    # V3.1 calls tools in its non-thinking mode (the prompt closes reasoning).
    "deepseek-v3.1": Example(
        family="DeepSeek-V3.1",
        tokenizer=MODEL_DIR,
        reasoning_parser="deepseek_v3",
        tool_parser="deepseek_v31",
        prompt=f"{DEEPSEEK_CHAT}</think>",
        output=(
            f"{ANSWER}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather"
            '<｜tool▁sep｜>{"city": "Paris", "unit": "celsius"}'
            f"<｜tool▁call▁end｜><｜tool▁calls▁end｜>{DEEPSEEK_END}"
        ),
    ),
    "deepseek-v3.2": Example(
        family="DeepSeek-V3.2",
        tokenizer=MODEL_DIR,
        reasoning_parser="deepseek_v3",
        tool_parser="deepseek_v32",
        prompt=DEEPSEEK_PROMPT,
        output=f"{REASONING}</think>{ANSWER}{_dsml('function_calls', '')}{DEEPSEEK_END}",
        chat_template_kwargs={"thinking": True},
    ),
    "deepseek-v4": Example(
        family="DeepSeek-V4",
        tokenizer="deepseek",
        reasoning_parser="deepseek_v4",
        tool_parser="deepseek_v4",
        prompt=DEEPSEEK_PROMPT,
        output=f"{REASONING}</think>{ANSWER}{_dsml('tool_calls', '')}{DEEPSEEK_END}",
    ),
    "deepseek-v4.1": Example(
        family="DeepSeek-V4.1",
        tokenizer=MODEL_DIR,
        reasoning_parser="deepseek_v41",
        tool_parser="deepseek_v41",
        prompt=DEEPSEEK_PROMPT,
        output=f"{REASONING}</think>{ANSWER}{_dsml('calls', ' ')}{DEEPSEEK_END}",
    ),
    "llama3-json": Example(
        family="Llama 3.1-3.3 (JSON tool calls)",
        tokenizer=MODEL_DIR,
        tool_parser="llama3_json",
        prompt=LLAMA3_PROMPT,
        output=f"{LLAMA_JSON_CALL}<|eot_id|>",
    ),
    # llama4_json is Llama 3's parser: it needs <|python_tag|>, which Llama 4's own
    # vocabulary lacks, so its directory has a Llama 3 vocabulary.
    "llama4-json": Example(
        family="Llama 4 (JSON tool calls)",
        tokenizer=MODEL_DIR,
        tool_parser="llama4_json",
        prompt=LLAMA3_PROMPT,
        output=f"<|python_tag|>{LLAMA_JSON_CALL}<|eom_id|>",
    ),
    "llama4-pythonic": Example(
        family="Llama 4 (pythonic calls, `<|python_start|>`)",
        tokenizer=MODEL_DIR,
        tool_parser="llama4_pythonic",
        prompt=(
            f"<|begin_of_text|><|header_start|>user<|header_end|>\n\n{QUESTION}<|eot|>"
            "<|header_start|>assistant<|header_end|>\n\n"
        ),
        output=f"<|python_start|>{PYTHONIC_CALL}<|python_end|><|eot|>",
    ),
    "pythonic": Example(
        family="Llama 3.2/4 and ToolACE (pythonic calls)",
        tokenizer=MODEL_DIR,
        tool_parser="pythonic",
        prompt=LLAMA3_PROMPT,
        output=f"{PYTHONIC_CALL}<|eot_id|>",
    ),
    "xlam": Example(
        family="xLAM",
        tokenizer=MODEL_DIR,
        tool_parser="xlam",
        prompt=QWEN3_PROMPT,
        output=(
            f"{ANSWER}\n```json\n"
            '[{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]\n```'
        ),
    ),
    "gpt-oss": Example(
        family="gpt-oss (Harmony)",
        tokenizer="gpt-oss",
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
    # MiniMax's stop token ends the output in the engine; none is written here.
    "minimax-m2": Example(
        family="MiniMax M2",
        tokenizer=MODEL_DIR,
        reasoning_parser="minimax_m2",
        tool_parser="minimax_m2",
        prompt=f"]~b]user\n{QUESTION}[e~[\n]~b]ai\n<think>\n",
        output=(
            f"{REASONING}\n</think>\n\n{ANSWER}\n<minimax:tool_call>\n"
            '<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n'
            '<parameter name="unit">celsius</parameter>\n</invoke>\n</minimax:tool_call>'
        ),
    ),
    "mistral": Example(
        family="Mistral before tokenizer v11 (Nemo, Small 3.0; `[TOOL_CALLS][{...}]`)",
        tokenizer=MODEL_DIR,
        reasoning_parser="mistral",
        tool_parser="mistral",
        prompt=f"<s>[INST]{QUESTION}[/INST]",
        output=(
            f"{ANSWER} [TOOL_CALLS]"
            '[{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]</s>'
        ),
    ),
    "magistral": Example(
        family="Mistral v11+ and Magistral (`[TOOL_CALLS]name[ARGS]{...}`, `[THINK]`)",
        tokenizer=MODEL_DIR,
        reasoning_parser="mistral",
        tool_parser="mistral",
        prompt=f"<s>[INST]{QUESTION}[/INST]",
        output=(
            f"[THINK]{REASONING}[/THINK]{ANSWER}"
            '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": "celsius"}</s>'
        ),
    ),
    "kimi-k2": Example(
        family="Kimi K2",
        tokenizer=MODEL_DIR,
        reasoning_parser="kimi_k2",
        tool_parser="kimi_k2",
        prompt=(
            f"<|im_user|>user<|im_middle|>{QUESTION}<|im_end|>"
            "<|im_assistant|>assistant<|im_middle|>"
        ),
        output=(
            f"<think>{REASONING}</think>{ANSWER}<|tool_calls_section_begin|><|tool_call_begin|>"
            'functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris", "unit": '
            '"celsius"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>'
        ),
    ),
    "glm": Example(
        family="GLM-4.5, GLM-4.7",
        tokenizer=MODEL_DIR,
        reasoning_parser="glm45",
        tool_parser="glm45",
        prompt=f"[gMASK]<sop><|user|>\n{QUESTION}<|assistant|>",
        output=(
            f"<think>{REASONING}</think>\n{ANSWER}\n<tool_call>get_weather\n"
            "<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
            "<arg_key>unit</arg_key>\n<arg_value>celsius</arg_value>\n</tool_call><|observation|>"
        ),
    ),
    "longcat": Example(
        family="LongCat-Flash (Hermes JSON calls in `<longcat_tool_call>` tags)",
        tokenizer=MODEL_DIR,
        reasoning_parser="deepseek_r1",
        tool_parser="longcat",
        prompt=f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>\n",
        output=(
            f"{REASONING}\n</think>\n\n{ANSWER}\n<longcat_tool_call>\n"
            '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'
            "\n</longcat_tool_call><|im_end|>"
        ),
    ),
    "step5": Example(
        family="Step-5 (Qwen3-Coder calls, content whitespace kept)",
        tokenizer=MODEL_DIR,
        reasoning_parser="step5",
        tool_parser="step5",
        prompt=f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>\n",
        output=f"{REASONING}\n</think>\n\n{ANSWER}\n{_QWEN3_XML_CALL}<|im_end|>",
    ),
    "step3p5": Example(
        family="Step-3.5, Step-3.7",
        tokenizer=MODEL_DIR,
        reasoning_parser="step3p5",
        tool_parser="step3p5",
        prompt=f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>\n",
        output=f"{REASONING}\n</think>\n{ANSWER}\n{_QWEN3_XML_CALL}<|im_end|>",
    ),
    "seed-oss": Example(
        family="Seed-OSS (`<seed:think>`, `<seed:tool_call>`)",
        tokenizer=MODEL_DIR,
        reasoning_parser="seed_oss",
        tool_parser="seed_oss",
        prompt=f"<seed:bos>user\n{QUESTION}<seed:eos><seed:bos>assistant\n",
        output=(
            f"<seed:think>{REASONING}</seed:think>{ANSWER}\n"
            + _QWEN3_XML_CALL.replace("tool_call>", "seed:tool_call>")
            + "<seed:eos>"
        ),
    ),
    "granite4": Example(
        family="Granite 4.0",
        tokenizer=MODEL_DIR,
        tool_parser="granite4",
        prompt=_GRANITE_PROMPT,
        output=f"{ANSWER}\n{HERMES_CALL.removesuffix('<|im_end|>')}<|end_of_text|>",
    ),
    # Granite 3.2's reasoning never says it ended while streaming (as in vLLM), so its
    # quick start answers without calling a tool.
    "granite": Example(
        family="Granite 3.2 (reasoning in phrases)",
        tokenizer=MODEL_DIR,
        reasoning_parser="granite",
        tool_parser=None,
        prompt=_GRANITE_PROMPT,
        output=(
            f"Here is my thought process:\n{REASONING}\n\nHere is my response:\n{ANSWER}"
            "<|end_of_text|>"
        ),
    ),
    "inkling": Example(
        family="Inkling (typed blocks, `<|content_thinking|>`, `<|content_invoke_tool_json|>`)",
        tokenizer=MODEL_DIR,
        reasoning_parser="inkling",
        tool_parser="inkling",
        prompt=f"<|message_user|><|content_text|>{QUESTION}<|end_message|><|message_model|>",
        output=(
            f"<|content_thinking|>{REASONING}<|end_message|>"
            f"<|message_model|><|content_text|>{ANSWER}<|end_message|>"
            "<|message_model|><|content_invoke_tool_json|>"
            '{"name": "get_weather", "args": {"city": "Paris", "unit": "celsius"}}<|end_message|>'
        ),
    ),
    "poolside": Example(
        family="Poolside Laguna",
        tokenizer=MODEL_DIR,
        reasoning_parser="poolside_v1",
        tool_parser="poolside_v1",
        prompt=f"<user>{QUESTION}<|im_end|>\n<assistant><think>\n",
        output=(
            f"{REASONING}</think>{ANSWER}<tool_call>get_weather\n<arg_key>city</arg_key>"
            "<arg_value>Paris</arg_value><arg_key>unit</arg_key><arg_value>celsius</arg_value>"
            "</tool_call><|im_end|>"
        ),
        chat_template_kwargs={"enable_thinking": True},
    ),
    "holo2": Example(
        family="Holo2",
        tokenizer=MODEL_DIR,
        reasoning_parser="holo2",
        tool_parser="deepseek_v31",
        prompt=DEEPSEEK_PROMPT,
        output=(
            f"{REASONING}</think>{ANSWER}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather"
            '<｜tool▁sep｜>{"city": "Paris", "unit": "celsius"}'
            f"<｜tool▁call▁end｜><｜tool▁calls▁end｜>{DEEPSEEK_END}"
        ),
    ),
    "nemotron-3": Example(
        family="Nemotron 3",
        tokenizer=MODEL_DIR,
        reasoning_parser="nemotron_v3",
        tool_parser="qwen3_coder",
        prompt=f"{QWEN3_PROMPT}<think>\n",
        output=f"{REASONING}\n</think>\n\n{ANSWER}\n{_QWEN3_XML_CALL}<|im_end|>",
    ),
    # Phi-4-mini's calls are read one-shot only (its stream sends nothing, as vLLM's), so
    # its quick start streams an answer.
    "phi4-mini": Example(
        family=(
            "Phi-4-mini (`functools[...]` JSON calls; one-shot only: the stream sends "
            "nothing, as vLLM's)"
        ),
        tokenizer=MODEL_DIR,
        tool_parser="phi4_mini_json",
        prompt=f"<|user|>{QUESTION}<|end|><|assistant|>",
        output=f"{ANSWER}<|end|>",
    ),
    "olmo3": Example(
        family=(
            "Olmo 3 (think markers spelled as text, read chunk by chunk as vLLM does: "
            "docs/parity.md)"
        ),
        tokenizer=MODEL_DIR,
        reasoning_parser="olmo3",
        tool_parser=None,
        prompt=f"{QWEN3_PROMPT}",
        output=f"<think>{REASONING}</think>{ANSWER}<|im_end|>",
    ),
    "ling3": Example(
        family="Ling 3 (GLM-4.7's format, thinking on by default)",
        tokenizer=MODEL_DIR,
        reasoning_parser="ling3",
        tool_parser="ling3",
        prompt=f"[gMASK]<sop><|user|>\n{QUESTION}<|assistant|>",
        output=(
            f"<think>{REASONING}</think>\n{ANSWER}\n<tool_call>get_weather\n"
            "<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
            "<arg_key>unit</arg_key>\n<arg_value>celsius</arg_value>\n</tool_call><|observation|>"
        ),
    ),
    "minimax-m3": Example(
        family="MiniMax M3 (`<mm:think>`, `]<]minimax[>[` namespaced calls)",
        tokenizer=MODEL_DIR,
        reasoning_parser="minimax_m3",
        tool_parser="minimax_m3",
        prompt=f"{QWEN3_PROMPT}<mm:think>",
        chat_template_kwargs={"thinking_mode": "enabled"},
        output=(
            f"{REASONING}</mm:think>{ANSWER}]<]minimax[>[<tool_call>\n"
            ']<]minimax[>[<invoke name="get_weather">\n'
            "]<]minimax[>[<city>Paris]<]minimax[>[</city>\n"
            "]<]minimax[>[<unit>celsius]<]minimax[>[</unit>\n]<]minimax[>[</invoke>\n"
            "]<]minimax[>[</tool_call><|im_end|>"
        ),
    ),
    "mimo": Example(
        family="MiMo (Qwen3-Coder's calls, values kept verbatim)",
        tokenizer=MODEL_DIR,
        reasoning_parser="mimo",
        tool_parser="mimo",
        prompt=f"{QWEN3_PROMPT}<think>\n",
        output=(
            f"{REASONING}\n</think>\n\n{ANSWER}\n<tool_call>\n<function=get_weather>\n"
            "<parameter=city>Paris</parameter>\n<parameter=unit>celsius</parameter>\n"
            "</function>\n</tool_call><|im_end|>"
        ),
    ),
    "k2-horizon": Example(
        family="K2 Horizon (a think block per reasoning effort; IFM call groups)",
        tokenizer=MODEL_DIR,
        reasoning_parser="k2_horizon",
        tool_parser="k2_horizon",
        prompt=QWEN3_PROMPT,
        output=(
            f"<ifm|think>{REASONING}</ifm|think>{ANSWER}<ifm|tool_calls><ifm|tool_call>"
            "get_weather<ifm|arg_key>city</ifm|arg_key><ifm|arg_value>Paris</ifm|arg_value>"
            "<ifm|arg_key>unit</ifm|arg_key><ifm|arg_value>celsius</ifm|arg_value>"
            "</ifm|tool_call></ifm|tool_calls><|im_end|>"
        ),
    ),
    "ernie45": Example(
        family=(
            "ERNIE-4.5 thinking (`<response>` answers, Hermes-shaped JSON calls; read chunk "
            "by chunk as vLLM does: docs/parity.md)"
        ),
        tokenizer=MODEL_DIR,
        reasoning_parser="ernie45",
        tool_parser="ernie45",
        prompt=f"{QWEN3_PROMPT}<think>\n",
        output=f"{REASONING}\n</think>\n\n{ANSWER}\n{HERMES_CALL}",
    ),
    "step3": Example(
        family=(
            "Step-3 (`steptml` invokes in `<｜tool_calls_begin｜>` blocks; one step per chunk "
            "as vLLM reads them: docs/parity.md)"
        ),
        tokenizer=MODEL_DIR,
        reasoning_parser="step3",
        tool_parser="step3",
        prompt=f"{QWEN3_PROMPT}<think>\n",
        output=(
            f"{REASONING}</think>{ANSWER}<｜tool_calls_begin｜><｜tool_call_begin｜>function"
            '<｜tool_sep｜><steptml:invoke name="get_weather">\n'
            '<steptml:parameter name="city">Paris</steptml:parameter>\n'
            '<steptml:parameter name="unit">celsius</steptml:parameter>\n'
            "</steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜><|im_end|>"
        ),
    ),
    # Muse: the prompt opens the assistant's turn; the model writes each message's header.
    "muse": Example(
        family="Muse Spark, Muse Glimmer (channel-scoped messages, ATEM calls)",
        tokenizer=MODEL_DIR,
        reasoning_parser="muse",
        tool_parser="muse",
        prompt=f"<|start|>user<|message|>{QUESTION}<|eot|><|start|>assistant",
        output=(
            f" to=self<|message|>{REASONING}<|eom|>"
            f"<|start|>assistant to=commentary<|message|>{ANSWER}<|eom|>"
            "<|start|>assistant to=get_weather<|message|><atem:function_calls>\n"
            '<atem:invoke name="get_weather">\n'
            '<atem:parameter name="city">Paris</atem:parameter>\n'
            '<atem:parameter name="unit">celsius</atem:parameter>\n'
            "</atem:invoke>\n</atem:function_calls><|eom|>"
        ),
    ),
    # GigaChat 3 has no reasoning parser; its call follows the answer's message separator.
    "gigachat3": Example(
        family="GigaChat 3 (one JSON call after `function call<|role_sep|>`)",
        tokenizer=MODEL_DIR,
        tool_parser="gigachat3",
        prompt=f"user<|role_sep|>\n{QUESTION}<|message_sep|>\n\nassistant<|role_sep|>\n",
        output=(
            f"{ANSWER}<|message_sep|>\n\nfunction call<|role_sep|>\n"
            '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}</s>'
        ),
    ),
    "gemma4": Example(
        family="Gemma 4 (`<|channel>` thought channel, `<|tool_call>call:NAME{key:value}` calls)",
        tokenizer=MODEL_DIR,
        reasoning_parser="gemma4",
        tool_parser="gemma4",
        prompt=f"<|turn>user\n{QUESTION}<turn|>\n<|turn>model\n<|channel>",
        output=(
            f"thought\n{REASONING}<channel|>{ANSWER}"
            '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,unit:<|"|>celsius<|"|>}'
            "<tool_call|><turn|>"
        ),
        chat_template_kwargs={"enable_thinking": True},
    ),
    "granite-4.2": Example(
        family=(
            "Granite 4.2 (thinking; Nemotron 3's format, the answer's leading newlines dropped)"
        ),
        tokenizer=MODEL_DIR,
        reasoning_parser="granite_thinking_parser",
        tool_parser="qwen3_coder",
        prompt=f"{QWEN3_PROMPT}<think>\n",
        output=f"{REASONING}\n</think>\n\n{ANSWER}\n{_QWEN3_XML_CALL}<|im_end|>",
    ),
    "granite-3": Example(
        family="Granite 3.0, 3.1 (a JSON array of calls after `<|tool_call|>` or `<tool_call>`)",
        tokenizer=MODEL_DIR,
        tool_parser="granite",
        prompt=_GRANITE_PROMPT,
        output=(
            f"{ANSWER}\n"
            '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", '
            '"unit": "celsius"}}]<|end_of_text|>'
        ),
    ),
    "cohere-command-a": Example(
        family="Cohere Command A, Command 4 (sections, citations, `<|START_ACTION|>` JSON calls)",
        tokenizer=MODEL_DIR,
        reasoning_parser="cohere_command3",
        tool_parser="cohere_command3",
        prompt=(
            f"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>{QUESTION}<|END_OF_TURN_TOKEN|>"
            "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
        ),
        output=(
            f"<|START_THINKING|>{REASONING}<|END_THINKING|>"
            f"<|START_RESPONSE|>{ANSWER}<|END_RESPONSE|><|START_ACTION|>[\n"
            '    {"tool_call_id": "0", "tool_name": "get_weather", '
            '"parameters": {"city": "Paris", "unit": "celsius"}}\n]<|END_ACTION|>'
            "<|END_OF_TURN_TOKEN|>"
        ),
    ),
    "granite-20b-fc": Example(
        family="Granite 20B function calling (`<function_call>` JSON calls)",
        tokenizer=MODEL_DIR,
        tool_parser="granite-20b-fc",
        prompt=f"{QWEN3_PROMPT}",
        output=(
            '<function_call> {"name": "get_weather", "arguments": {"city": "Paris", '
            '"unit": "celsius"}}<|im_end|>'
        ),
    ),
    # A13B's markers are text; its stream reads calls only when the answer opens with
    # them, so the answer is the call. Llama 3's vocabulary stands in for A13B's.
    "hunyuan-a13b": Example(
        family="Hunyuan-A13B (`<think>`/`<answer>` and `<tool_calls>` spelled as text)",
        tokenizer=MODEL_DIR,
        reasoning_parser="hunyuan_a13b",
        tool_parser="hunyuan_a13b",
        prompt=LLAMA3_PROMPT,
        output=(
            f"<think>\n{REASONING}\n</think>\n<answer>\n<tool_calls>"
            '[{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]'
            "</tool_calls>\n</answer><|eot_id|>"
        ),
    ),
    "hy-v4": Example(
        family="Hunyuan HY-V3, HY-V4 (`<think>` tokens; thinking by `reasoning_effort`)",
        tokenizer=MODEL_DIR,
        reasoning_parser="hy_v4",
        tool_parser="hy_v4",
        prompt=f"{QWEN3_PROMPT}<think>",
        output=(
            f"{REASONING}</think>{ANSWER}<tool_calls><tool_call>get_weather"
            "<arg_key>city</arg_key><arg_value>Paris</arg_value>"
            "<arg_key>unit</arg_key><arg_value>celsius</arg_value></tool_call></tool_calls>"
            "<|im_end|>"
        ),
    ),
    "olmo3-instruct": Example(
        family="Olmo 3 Instruct (pythonic calls, one a line, in `<function_calls>`)",
        tokenizer=MODEL_DIR,
        tool_parser="olmo3",
        prompt=QWEN3_PROMPT,
        output=(
            "<function_calls>\nget_weather(city='Paris', unit='celsius')\n</function_calls>"
            "<|im_end|>"
        ),
    ),
    "dots": Example(
        family="dots (`<dots_function_call>` blocks of `<invoke>` calls or JSON)",
        tokenizer=MODEL_DIR,
        tool_parser="dots",
        prompt=QWEN3_PROMPT,
        output=(
            f'{ANSWER}\n<dots_function_call>\n<invoke name="get_weather">\n'
            '<parameter name="city">Paris</parameter>\n'
            '<parameter name="unit">celsius</parameter>\n'
            "</invoke>\n</dots_function_call><|im_end|>"
        ),
    ),
    "internlm": Example(
        family=(
            "InternLM2 (one JSON call between `<|action_start|><|plugin|>` and "
            "`<|action_end|>`; read chunk by chunk as vLLM does: docs/parity.md)"
        ),
        tokenizer=MODEL_DIR,
        tool_parser="internlm",
        prompt=QWEN3_PROMPT,
        output=(
            f"{ANSWER}<|action_start|><|plugin|>\n"
            '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}'
            "<|action_end|><|im_end|>"
        ),
    ),
    "functiongemma": Example(
        family=(
            "FunctionGemma (`<start_function_call>call:NAME{key:<escape>value<escape>}` calls; "
            "read chunk by chunk as vLLM does, a call's arguments cut by length: docs/parity.md)"
        ),
        tokenizer=MODEL_DIR,
        tool_parser="functiongemma",
        prompt=QWEN3_PROMPT,
        # The white space puts the marker first in a chunk of the quick start's four
        # tokens: text that shares its chunk is dropped, as vLLM drops it.
        output=(
            f"{ANSWER} \t \n <start_function_call>call:get_weather{{city:<escape>Paris<escape>,"
            "unit:<escape>celsius<escape>}<end_function_call><|im_end|>"
        ),
    ),
    "plamo3": Example(
        family="PLaMo 3 (`<|plamo:begin_think:plamo|>`; call blocks; markers several tokens each)",
        tokenizer=MODEL_DIR,
        reasoning_parser="plamo3",
        tool_parser="plamo3",
        prompt=f"<|plamo:tag|>user<|plamo:msg|>{QUESTION}<|plamo:tag|>assistant<|plamo:msg|>",
        output=(
            f"{REASONING}<|plamo:end_think:plamo|>{ANSWER}"
            "<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|>"
            "<|plamo:begin_tool_name:plamo|>get_weather<|plamo:end_tool_name:plamo|>"
            "<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>"
            '{"city": "Paris", "unit": "celsius"}<|plamo:end_tool_arguments:plamo|>'
            "<|plamo:end_tool_request:plamo|><|plamo:end_tool_requests:plamo|><|plamo:tag|>"
        ),
    ),
    # MiniCPM-V writes a newline as a backslash and an n: the answer's comes back as one.
    "minicpm-v": Example(
        family=(
            "MiniCPM-V (Qwen3's format; newlines written as `\\n` recovered, code and LaTeX kept)"
        ),
        tokenizer=MODEL_DIR,
        reasoning_parser="minicpmv",
        tool_parser="qwen3_coder",
        prompt=f"{QWEN3_PROMPT}<think>\n",
        output=f"{REASONING}</think>{ANSWER}\\n{_QWEN3_XML_CALL}<|im_end|>",
    ),
    # MiniCPM5's calls are XML read as text; Qwen3's vocabulary stands in for its own.
    "minicpm5": Example(
        family="MiniCPM5 (`<function name=...><param name=...>` XML calls)",
        tokenizer=MODEL_DIR,
        tool_parser="minicpm5",
        prompt=QWEN3_PROMPT,
        output=(
            f'{ANSWER}\n<function name="get_weather"><param name="city">Paris</param>'
            '<param name="unit">celsius</param></function><|im_end|>'
        ),
    ),
    "kimi-k3": Example(
        family="Kimi K3 (XTML `think`, `response` and `tools` channels)",
        tokenizer=MODEL_DIR,
        reasoning_parser="kimi_k3",
        tool_parser="kimi_k3",
        prompt=(
            f'<|open|>message role="user"<|sep|>{QUESTION}<|close|>message<|sep|>'
            '<|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>think<|sep|>'
        ),
        output=(
            f"{REASONING}<|close|>think<|sep|><|open|>response<|sep|>{ANSWER}"
            '<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="get_weather" '
            'index="1"<|sep|><|open|>argument key="city" type="string"<|sep|>Paris'
            '<|close|>argument<|sep|><|open|>argument key="unit" type="string"<|sep|>'
            "celsius<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
            "<|close|>message<|sep|><|end_of_msg|>"
        ),
    ),
    "apertus": Example(
        family=(
            "Apertus (a JSON array of `{name: arguments}` objects between "
            "`<|tools_prefix|>` and `<|tools_suffix|>`; read chunk by chunk as vLLM does: "
            "docs/parity.md)"
        ),
        tokenizer=MODEL_DIR,
        tool_parser="apertus",
        prompt=QWEN3_PROMPT,
        output=(
            # Text that shares a chunk with the block's markers is lost in vLLM's stream
            # (and ours): the call alone.
            "<|tools_prefix|>"
            '[{"get_weather": {"city": "Paris", "unit": "celsius"}}]'
            "<|tools_suffix|><|im_end|>"
        ),
    ),
    "lfm2": Example(
        family=(
            "LFM2, LFM2.5 (pythonic calls between `<|tool_call_start|>` and "
            "`<|tool_call_end|>`, repaired and read chunk by chunk as vLLM does: "
            "docs/parity.md)"
        ),
        tokenizer=MODEL_DIR,
        tool_parser="lfm2",
        prompt=QWEN3_PROMPT,
        output=(
            f"{ANSWER}<|tool_call_start|>"
            "[get_weather(city='Paris', unit='celsius')]"
            "<|tool_call_end|><|im_end|>"
        ),
    ),
    "jamba": Example(
        family=(
            "Jamba (a JSON array of calls between `<tool_calls>` and `</tool_calls>`; "
            "one step per chunk as vLLM reads them: docs/parity.md)"
        ),
        tokenizer=MODEL_DIR,
        tool_parser="jamba",
        prompt=QWEN3_PROMPT,
        # No text before the calls: vLLM's stream drops what shares the marker's chunk.
        output=(
            "<tool_calls>"
            '[{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]'
            "</tool_calls><|im_end|>"
        ),
    ),
    "hf": Example(
        family="Models read by their tokenizer's `response_template` (`tokenizer_config.json`)",
        tokenizer=MODEL_DIR,
        reasoning_parser="hf",
        tool_parser="hf",
        prompt=f"{QWEN3_PROMPT}<think>\n",
        output=f"{REASONING}</think>\n\n{ANSWER}\n{HERMES_CALL}",
    ),
    "beam": Example(
        family="Beam (read by its tokenizer's `response_template`)",
        tokenizer=MODEL_DIR,
        reasoning_parser="beam",
        tool_parser="beam",
        prompt=f"{QWEN3_PROMPT}<think>\n",
        output=f"{REASONING}</think>\n\n{ANSWER}\n{HERMES_CALL}",
    ),
}
